// SPDX-License-Identifier: GPL-2.0
/*
 * gpucloud lab stand-in for the NVIDIA kernel module, not NVIDIA software.
 * It drives no hardware: loaded, it serves /proc/driver/nvidia/version in
 * the real driver's format so that the lab's userspace sees a loaded driver
 * of NVSIM_VERSION. NVSIM_VERSION, NVSIM_OPEN, NVSIM_DATE and NVSIM_GCC come
 * from the Kbuild file written by scripts/nvsim/build_repo.py.
 */
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>

static struct proc_dir_entry *nvsim_dir;

const char nvsim_driver_version[] = NVSIM_VERSION;
EXPORT_SYMBOL_GPL(nvsim_driver_version);

static int nvsim_version_show(struct seq_file *m, void *v)
{
	if (NVSIM_OPEN)
		seq_printf(m, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (gpucloud-lab-stand-in)  %s\n",
			   NVSIM_VERSION, NVSIM_DATE);
	else
		seq_printf(m, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  %s (gpucloud-lab-stand-in)\n",
			   NVSIM_VERSION, NVSIM_DATE);
	seq_printf(m, "GCC version:  %s\n", NVSIM_GCC);
	return 0;
}

static int __init nvsim_init(void)
{
	nvsim_dir = proc_mkdir("driver/nvidia", NULL);
	if (!nvsim_dir)
		return -ENOMEM;
	if (!proc_create_single("version", 0444, nvsim_dir, nvsim_version_show)) {
		proc_remove(nvsim_dir);
		return -ENOMEM;
	}
	pr_info("NVRM: loading NVIDIA UNIX %sKernel Module for x86_64  %s  (gpucloud lab stand-in)\n",
		NVSIM_OPEN ? "Open " : "", NVSIM_VERSION);
	return 0;
}

static void __exit nvsim_exit(void)
{
	proc_remove(nvsim_dir);
}

module_init(nvsim_init);
module_exit(nvsim_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gpucloud lab stand-in for the NVIDIA driver, not NVIDIA software");
MODULE_VERSION(NVSIM_VERSION);
