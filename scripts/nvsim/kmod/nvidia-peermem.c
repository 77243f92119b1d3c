// SPDX-License-Identifier: GPL-2.0
/*
 * gpucloud lab stand-in for nvidia-peermem, not NVIDIA software. It uses a
 * symbol of the stand-in nvidia module, so modprobe loads nvidia first, as
 * with the real one; its MODULE_VERSION lets tests check that peermem is
 * only loaded when it matches the loaded driver.
 */
#include <linux/module.h>

extern const char nvsim_driver_version[];

static int __init nvsim_peermem_init(void)
{
	pr_info("nvidia-peermem: gpucloud lab stand-in %s over driver %s\n", NVSIM_VERSION, nvsim_driver_version);
	return 0;
}

static void __exit nvsim_peermem_exit(void)
{
}

module_init(nvsim_peermem_init);
module_exit(nvsim_peermem_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gpucloud lab stand-in for nvidia-peermem, not NVIDIA software");
MODULE_VERSION(NVSIM_VERSION);
