"""A job's ``-L/--licenses`` checked against slurm.conf's ``Licenses=``.

As Slurm's ``license_validate``: the list must parse, every name must be a configured
license, and no count may exceed the license's total (a job that could never start is
refused rather than left waiting for ever). Every failure is Slurm's one error,
``Invalid license specification`` (ESLURM_INVALID_LICENSES), at submission and at
``scontrol update job N Licenses=`` alike.
"""

from __future__ import annotations

from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.licenses import LicenseSyntaxError, format_licenses, parse


def checked(text: str, conf: SlurmConfig) -> str:
    """``text`` in the spelling the job keeps (``fluent:2,ansys:1``; "" for none), or
    ``SlurmError(ESLURM_INVALID_LICENSES)``."""
    try:
        asked = parse(text)
    except LicenseSyntaxError:
        raise SlurmError(errors.ESLURM_INVALID_LICENSES) from None
    totals = dict(conf.licenses)
    for name, count in asked:
        if count > totals.get(name, 0):
            raise SlurmError(errors.ESLURM_INVALID_LICENSES)
    return format_licenses(asked)
