/*
 * A fake NVML (libnvidia-ml) for tests/unit/test_gpu_probe.py, which compiles
 * it into a shared library in a temporary directory and points
 * CORRAL_NVML_LIBRARY at it. It implements only the calls nodeagent/gpus/nvml.py
 * makes, with this project's own declarations of the documented NVML ABI
 * (return codes are ints, devices opaque pointers, the structures as in
 * NVIDIA's API reference).
 *
 * The host it describes: eight "NVIDIA H100 80GB HBM3" GPUs on two sockets of
 * 28 cores x 2 threads (CPUs 0-27,56-83 on socket 0 near GPUs 0-3, CPUs
 * 28-55,84-111 on socket 1 near GPUs 4-7). Minor numbers are the indexes but
 * for GPUs 6 and 7, which have minors 7 and 6. NVLink lanes per GPU g:
 * 0-5 active to GPU g^1, 6-7 active to GPU g^2, 8-11 active to an NVSwitch
 * (not a GPU), 12-15 inactive, 16-17 absent (NVML_ERROR_INVALID_ARGUMENT).
 * MIG: GPU 5 disabled but pending enable; GPU 6 enabled with seven 1g.10gb
 * devices (GPU instances 7-13); GPU 7 enabled with two 3g.40gb devices (GPU
 * instances 1 and 2); compute instance 0 each.
 *
 * FAKE_NVML_INIT_RC (environment), when set, is what nvmlInit_v2 returns.
 * FAKE_NVML_NO_MIG, when set, turns MIG off on every GPU (eight whole GPUs).
 * Built with -DOLD_DRIVER it lacks nvmlDeviceGetAttributes_v2, as drivers
 * before MIG attributes do.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;

#define OK 0
#define ERR_UNINITIALIZED 1
#define ERR_INVALID_ARGUMENT 2
#define ERR_NOT_FOUND 6
#define ERR_INSUFFICIENT_SIZE 7

typedef struct {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} fake_memory_t;

typedef struct {
	char bus_id_legacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pci_device_id;
	unsigned int pci_subsystem_id;
	char bus_id[32];
} fake_pci_t;

typedef struct {
	unsigned int multiprocessors;
	unsigned int copy_engines;
	unsigned int decoders;
	unsigned int encoders;
	unsigned int jpegs;
	unsigned int ofas;
	unsigned int gi_slices;
	unsigned int ci_slices;
	unsigned long long memory_mb;
} fake_attributes_t;

struct fake_device {
	int gpu;	/* index of the GPU (of the parent for a MIG device) */
	int mig;	/* MIG index, or -1 for a whole GPU */
};

typedef struct fake_device *nvmlDevice_t;

#define GPUS 8
#define LANES 18
#define MIG_MAX 7

static const unsigned int buses[GPUS] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
static const unsigned int minors[GPUS] = {0, 1, 2, 3, 4, 5, 7, 6};
static const unsigned int mig_current[GPUS] = {0, 0, 0, 0, 0, 0, 1, 1};
static const unsigned int mig_pending[GPUS] = {0, 0, 0, 0, 0, 1, 1, 1};
static const int mig_count[GPUS] = {0, 0, 0, 0, 0, 0, 7, 2};

static struct fake_device gpus[GPUS];
static struct fake_device migs[GPUS][MIG_MAX];
static int no_mig;
static int initialized;

static int valid(nvmlDevice_t device)
{
	return initialized && device && device->gpu >= 0 && device->gpu < GPUS;
}

static nvmlReturn_t copy_text(const char *text, char *out, unsigned int length)
{
	if (!out)
		return ERR_INVALID_ARGUMENT;
	if (strlen(text) + 1 > length)
		return ERR_INSUFFICIENT_SIZE;
	strcpy(out, text);
	return OK;
}

static void fill_pci(fake_pci_t *pci, unsigned int bus)
{
	memset(pci, 0, sizeof(*pci));
	pci->bus = bus;
	pci->pci_device_id = 0x233010de;
	snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", bus);
	snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "0000:%02X:00.0", bus);
}

nvmlReturn_t nvmlInit_v2(void)
{
	const char *rc = getenv("FAKE_NVML_INIT_RC");
	if (rc && *rc)
		return atoi(rc);
	no_mig = getenv("FAKE_NVML_NO_MIG") != NULL;
	for (int g = 0; g < GPUS; g++) {
		gpus[g].gpu = g;
		gpus[g].mig = -1;
		for (int m = 0; m < MIG_MAX; m++) {
			migs[g][m].gpu = g;
			migs[g][m].mig = m;
		}
	}
	initialized++;
	return OK;
}

nvmlReturn_t nvmlShutdown(void)
{
	if (!initialized)
		return ERR_UNINITIALIZED;
	initialized--;
	return OK;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
	switch (result) {
	case OK:
		return "Success";
	case ERR_UNINITIALIZED:
		return "Uninitialized";
	case ERR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case ERR_NOT_FOUND:
		return "Not Found";
	case 9:
		return "Driver Not Loaded";
	default:
		return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!initialized)
		return ERR_UNINITIALIZED;
	*count = GPUS;
	return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!initialized)
		return ERR_UNINITIALIZED;
	if (index >= GPUS)
		return ERR_INVALID_ARGUMENT;
	*device = &gpus[index];
	return OK;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	char text[96];

	if (!valid(device))
		return ERR_INVALID_ARGUMENT;
	if (device->mig < 0)
		return copy_text("NVIDIA H100 80GB HBM3", name, length);
	snprintf(text, sizeof(text), "NVIDIA H100 80GB HBM3 MIG %s",
		 device->gpu == 6 ? "1g.10gb" : "3g.40gb");
	return copy_text(text, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	char text[96];

	if (!valid(device))
		return ERR_INVALID_ARGUMENT;
	if (device->mig < 0)
		snprintf(text, sizeof(text), "GPU-6b7e0c3a-91f2-4d5e-8a60-00000000000%d",
			 device->gpu);
	else
		snprintf(text, sizeof(text), "MIG-0f1e2d3c-4b5a-5968-8776-0000000%d%04d",
			 device->gpu, device->mig);
	return copy_text(text, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, fake_memory_t *memory)
{
	unsigned long long mib;

	if (!valid(device))
		return ERR_INVALID_ARGUMENT;
	if (device->mig < 0)
		mib = 81559;
	else
		mib = device->gpu == 6 ? 9984 : 40448;
	memory->total = mib << 20;
	memory->used = 0;
	memory->free = memory->total;
	return OK;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, fake_pci_t *pci)
{
	if (!valid(device) || device->mig >= 0)
		return ERR_INVALID_ARGUMENT;
	fill_pci(pci, buses[device->gpu]);
	return OK;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
	if (!valid(device) || device->mig >= 0)
		return ERR_INVALID_ARGUMENT;
	*minor = minors[device->gpu];
	return OK;
}

static void set_cpu(unsigned long *cpus, unsigned int size, unsigned int cpu)
{
	unsigned int bits = 8 * sizeof(unsigned long);

	if (cpu / bits < size)
		cpus[cpu / bits] |= 1UL << (cpu % bits);
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int size,
				      unsigned long *cpus)
{
	unsigned int base;

	if (!valid(device) || device->mig >= 0)
		return ERR_INVALID_ARGUMENT;
	memset(cpus, 0, size * sizeof(unsigned long));
	base = device->gpu < 4 ? 0 : 28;
	for (unsigned int c = 0; c < 28; c++) {
		set_cpu(cpus, size, base + c);
		set_cpu(cpus, size, base + 56 + c);
	}
	return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *active)
{
	if (!valid(device) || device->mig >= 0 || link >= 16)
		return ERR_INVALID_ARGUMENT;
	*active = link < 12 ? 1 : 0;
	return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
						 fake_pci_t *pci)
{
	int g;

	if (!valid(device) || device->mig >= 0 || link >= 12)
		return ERR_INVALID_ARGUMENT;
	g = device->gpu;
	if (link < 6)
		fill_pci(pci, buses[g ^ 1]);
	else if (link < 8)
		fill_pci(pci, buses[g ^ 2]);
	else
		fill_pci(pci, 0xc0 + (link - 8));	/* NVSwitch ports */
	return OK;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current,
				  unsigned int *pending)
{
	if (!valid(device) || device->mig >= 0)
		return ERR_INVALID_ARGUMENT;
	*current = no_mig ? 0 : mig_current[device->gpu];
	*pending = no_mig ? 0 : mig_pending[device->gpu];
	return OK;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
	if (!valid(device) || device->mig >= 0)
		return ERR_INVALID_ARGUMENT;
	*count = MIG_MAX;
	return OK;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
						 nvmlDevice_t *mig)
{
	if (!valid(device) || device->mig >= 0 || no_mig || !mig_current[device->gpu])
		return ERR_INVALID_ARGUMENT;
	if (index >= MIG_MAX)
		return ERR_INVALID_ARGUMENT;
	if ((int)index >= mig_count[device->gpu])
		return ERR_NOT_FOUND;
	*mig = &migs[device->gpu][index];
	return OK;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
	if (!valid(device) || device->mig < 0)
		return ERR_INVALID_ARGUMENT;
	*id = device->gpu == 6 ? 7 + device->mig : 1 + device->mig;
	return OK;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
	if (!valid(device) || device->mig < 0)
		return ERR_INVALID_ARGUMENT;
	*id = 0;
	return OK;
}

#ifndef OLD_DRIVER
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, fake_attributes_t *attributes)
{
	int small;

	if (!valid(device) || device->mig < 0)
		return ERR_INVALID_ARGUMENT;
	small = device->gpu == 6;
	memset(attributes, 0, sizeof(*attributes));
	attributes->multiprocessors = small ? 16 : 60;
	attributes->gi_slices = small ? 1 : 3;
	attributes->ci_slices = small ? 1 : 3;
	attributes->memory_mb = small ? 9984 : 40448;
	return OK;
}
#endif
