"""The refused host was not touched."""


def test_no_runtime_folder(host):
    assert not host.file("/opt/vllm").exists


def test_no_python_packages_were_installed(host):
    assert host.run("ls /usr/bin/python3.1[0-9]").rc != 0
