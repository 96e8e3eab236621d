"""Corral's shared library: config, hostlists, time formats, auth, the node
bitmap and the wire types. Every Corral program imports from here, and this
package imports nothing heavy at module level (clients must start in < 30 ms).
"""

__version__ = "0.1.0"

#: The Slurm release whose interface Corral follows; clients print it for --version.
SLURM_VERSION = "24.11.0"
