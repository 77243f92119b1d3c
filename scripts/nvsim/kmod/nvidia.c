// SPDX-License-Identifier: GPL-2.0
/*
 * gpucloud lab stand-in for the NVIDIA kernel module, not NVIDIA software.
 * It drives no hardware: loaded, it serves /proc/driver/nvidia/version in
 * the real driver's format so that the lab's userspace sees a loaded driver
 * of NVSIM_VERSION. NVSIM_VERSION, NVSIM_OPEN, NVSIM_DATE and NVSIM_GCC come
 * from the Kbuild file written by scripts/nvsim/build_repo.py.
 *
 * /proc/driver/nvidia/gpucloud-xid (root, write-only) is the lab's fault switch for
 * Xid events: a line written to it that starts with "NVRM: Xid " is printed by this
 * module with KERN_ERR, so it reaches the kernel log as a kernel message, as the real
 * driver's Xid lines do. A line written to /dev/kmsg from userspace would not: the
 * kernel files it under LOG_USER, and journald then takes "NVRM:" for a syslog
 * identifier and strips it from the message (seen in the metal lane, 2026-12-01).
 */
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#define NVSIM_XID_PREFIX "NVRM: Xid "

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

static ssize_t nvsim_xid_write(struct file *file, const char __user *buf, size_t count, loff_t *ppos)
{
	char line[256];
	size_t n = min(count, sizeof(line) - 1);

	if (copy_from_user(line, buf, n))
		return -EFAULT;
	line[n] = '\0';
	strim(line);
	if (strncmp(line, NVSIM_XID_PREFIX, strlen(NVSIM_XID_PREFIX)) != 0)
		return -EINVAL;
	pr_err("%s\n", line);
	return count;
}

static const struct proc_ops nvsim_xid_ops = {
	.proc_write = nvsim_xid_write,
};

static int __init nvsim_init(void)
{
	nvsim_dir = proc_mkdir("driver/nvidia", NULL);
	if (!nvsim_dir)
		return -ENOMEM;
	if (!proc_create_single("version", 0444, nvsim_dir, nvsim_version_show) ||
	    !proc_create("gpucloud-xid", 0200, nvsim_dir, &nvsim_xid_ops)) {
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
