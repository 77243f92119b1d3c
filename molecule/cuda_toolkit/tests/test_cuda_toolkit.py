"""Verify gpucloud.fleet.cuda_toolkit on the lab nodes' real state.

The toolkit is the OS's real nvidia-cuda-toolkit (Debian's, Ubuntu's; nvcc runs without a
GPU). cuDNN comes from the scenario's signed loopback mirror, whose packages are STAND-INS built by
prepare.yml (their description says so): they carry cudnn_version.h with the version
macros only, because NVIDIA's cuDNN cannot be reached from the lab.
"""
import pytest

NODES = {
    "cuda_toolkit-debian12": {"cuda": "11.8", "cudnn": ("8", "9", "7"), "cudnn_pkgs": ["libcudnn8", "libcudnn8-dev"],
                              "driver": "535.261.03", "held": "nvidia-smi"},
    # Ubuntu's server driver: nvidia-utils-<branch>-server carries nvidia-smi.
    "cuda_toolkit-ubuntu2404": {"cuda": "12.0", "cudnn": ("9", "1", "0"),
                                "cudnn_pkgs": ["libcudnn9-cuda-12", "libcudnn9-dev-cuda-12"],
                                "driver": "580.178.04", "held": "nvidia-utils-580-server"},
}


@pytest.fixture()
def node(host):
    return NODES[host.backend.get_hostname()]


def test_distro_toolkit_installed(host, node):
    pkg = host.package("nvidia-cuda-toolkit")
    assert pkg.is_installed
    assert pkg.version.split("~")[1].startswith(node["cuda"])


def test_nvcc_reports_the_default_toolkit(host, node):
    out = host.check_output("nvcc --version")
    assert "release %s," % node["cuda"] in out


def test_login_shell_environment(host, node):
    f = host.file("/etc/profile.d/cuda.sh")
    assert f.is_file and f.mode == 0o644 and f.user == "root"
    env = host.check_output("env -i bash -lc 'echo $CUDA_HOME; command -v nvcc'").splitlines()
    assert env[0] == "/usr/lib/nvidia-cuda-toolkit"
    assert env[1] in ("/usr/lib/nvidia-cuda-toolkit/bin/nvcc", "/usr/bin/nvcc")
    assert not host.file("/root/.bashrc").contains("CUDA")


def test_runtime_library_on_linker_path(host):
    # Debian's and Ubuntu's toolkit keeps libcudart in the multiarch directory, already on ld's path.
    assert "libcudart.so" in host.check_output("ldconfig -p")


def test_driver_lock_still_held(host, node):
    held = host.check_output("apt-mark showhold").split()
    assert node["held"] in held
    assert host.package(node["held"]).version.startswith(node["driver"] + "-")


def test_stand_in_cudnn_from_signed_mirror(host, node):
    for name in node["cudnn_pkgs"]:
        assert host.package(name).is_installed, name
        desc = host.check_output("dpkg-query -W -f='${Description}' %s" % name)
        assert desc.startswith("STAND-IN"), "%s is expected to be the lab's stand-in" % name
        policy = host.check_output("apt-cache policy %s" % name)
        assert "http://127.0.0.1:8088" in policy
    assert "127.0.0.1:8088_._InRelease" in host.check_output("ls /var/lib/apt/lists/")


def test_cudnn_version_header(host, node):
    text = host.file("/usr/include/cudnn_version.h").content_string
    major, minor, patch = node["cudnn"]
    assert "#define CUDNN_MAJOR %s\n" % major in text
    assert "#define CUDNN_MINOR %s\n" % minor in text
    assert "#define CUDNN_PATCHLEVEL %s\n" % patch in text
