#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a host: loaded module, packages, fabric manager, drift."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_facts
short_description: Compare the loaded NVIDIA driver, its packages and fabric manager, and decide
description:
  - Reads C(/proc/driver/nvidia/version) (loaded version, open or proprietary module), Secure Boot
    from the EFI variables, whether kernel headers exist for the running kernel and whether nouveau
    is loaded.
  - Decides whether the driver is already satisfied (a driver of O(branch) or newer loaded, NVML
    answering, the right module flavour), which fabric manager version NVSwitch systems need
    (exactly the driver's), and reports drift between the loaded driver, the installed packages and
    fabric manager.
  - Package versions come from C(dpkg-query) or C(rpm) (C(rpm) with O(package_manager=dnf)); a host
    without either (a container image whose driver comes from the host) has no driver packages.
  - Read-only; sets C(ansible_facts.nvidia_driver).
version_added: "0.1.0"
author: vllm-fleet
options:
  branch:
    description: The driver branch the fleet runs (vLLM's CUDA 13 wheels need 580 or newer).
    type: int
    required: true
  driver_package:
    description: The package whose version is the driver's.
    type: str
    required: true
  fabricmanager_package:
    description: The fabric manager package.
    type: str
    required: true
  fabricmanager_needed:
    description: The host has NVSwitches (C(gpu_topology) fact C(nvswitch_present)).
    type: bool
    default: false
  nvml_ok:
    description: NVML answered with at least one GPU (C(gpu_topology)).
    type: bool
    default: false
  open_modules:
    description: The fleet wants the open kernel modules.
    type: bool
    default: true
  distribution:
    description: C(ansible_distribution), for NVIDIA's repository folder.
    type: str
    required: true
  distribution_major_version:
    description: C(ansible_distribution_major_version) (Kylin V10 says C(V10)).
    type: str
    required: true
  architecture:
    description: C(ansible_architecture).
    type: str
    default: x86_64
  kernel_release:
    description: The running kernel (C(ansible_kernel)); tests give another.
    type: str
    required: true
  package_manager:
    description:
      - C(dnf) (the RHEL family, Kylin V10 included) adds C(dnf_install), how NVIDIA's guide installs
        the branch there, or C(install_error) naming the setting it cannot honour.
      - C(apt) (the Debian family) adds C(install_error) when the branch cannot be pinned from the
        source asked for (Debian's own archive).
    type: str
    choices: [apt, dnf, other]
    default: apt
  kernel_modules:
    description: C(dkms) or C(precompiled) (role variable C(nvidia_driver_kernel_modules)).
    type: str
    choices: [dkms, precompiled]
    default: dkms
  source:
    description: Where packages come from (role variable C(nvidia_driver_source)).
    type: str
    choices: [cuda_repo, mirror, distribution]
    default: cuda_repo
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Compare the driver with the fleet's branch
  nvidia_driver_facts:
    branch: 580
    driver_package: nvidia-open
    fabricmanager_package: nvidia-fabricmanager-580
    fabricmanager_needed: "{{ ansible_facts.gpu_topology.nvswitch_present }}"
    nvml_ok: "{{ ansible_facts.gpu_topology.gpus | length > 0 }}"
    distribution: "{{ ansible_facts.distribution }}"
    distribution_major_version: "{{ ansible_facts.distribution_major_version }}"
    kernel_release: "{{ ansible_facts.kernel }}"
"""

RETURN = r"""
ansible_facts:
  description: C(nvidia_driver) with C(loaded), C(packages), C(satisfied), C(fabricmanager), C(drift),
    C(problems), C(reboot_required), C(secure_boot), C(kernel_headers), C(nouveau_loaded), C(repo_folder),
    with O(package_manager=dnf) C(dnf_install) (C(module_stream), C(branch_lock), C(packages), C(lock)),
    and with O(package_manager=dnf) or O(package_manager=apt) C(install_error).
  returned: always
  type: dict
  sample:
    nvidia_driver:
      loaded: {version: 580.159.04, open: true}
      satisfied: true
      drift: []
      repo_folder: ubuntu2404/x86_64
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nvidia_driver import (
    DriverError, apt_check, decide, dnf_install, host_state, parse_package_query, repo_folder)


def installed_versions(module, names, package_manager):
    """Installed versions of ``names`` (missing ones left out), from the package manager's
    database (apt: dpkg, dnf: rpm; otherwise whichever the host has)."""
    dpkg = module.get_bin_path("dpkg-query") if package_manager != "dnf" else None
    rpm = module.get_bin_path("rpm")
    if dpkg:
        argv = [dpkg, "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n"] + names
    elif rpm:
        argv = [rpm, "-q", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\tii \n"] + names
    else:
        return {}
    _rc, out, _err = module.run_command(argv)
    return parse_package_query(out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            branch=dict(type="int", required=True),
            driver_package=dict(type="str", required=True),
            fabricmanager_package=dict(type="str", required=True),
            fabricmanager_needed=dict(type="bool", default=False),
            nvml_ok=dict(type="bool", default=False),
            open_modules=dict(type="bool", default=True),
            distribution=dict(type="str", required=True),
            distribution_major_version=dict(type="str", required=True),
            architecture=dict(type="str", default="x86_64"),
            kernel_release=dict(type="str", required=True),
            package_manager=dict(type="str", default="apt", choices=["apt", "dnf", "other"]),
            kernel_modules=dict(type="str", default="dkms", choices=["dkms", "precompiled"]),
            source=dict(type="str", default="cuda_repo", choices=["cuda_repo", "mirror", "distribution"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    packages = installed_versions(module, [p["driver_package"], p["fabricmanager_package"]],
                                  p["package_manager"])
    state = host_state("/proc/driver/nvidia/version", "/sys/firmware/efi/efivars",
                       p["kernel_release"], "/lib/modules", "/sys/module")
    facts = decide(state["loaded"], p["nvml_ok"], p["branch"], packages, p["driver_package"],
                   p["fabricmanager_package"], p["fabricmanager_needed"], p["open_modules"])
    facts.update({k: v for k, v in state.items() if k != "loaded"})
    try:
        facts["repo_folder"] = repo_folder(p["distribution"], p["distribution_major_version"],
                                           p["architecture"])
    except DriverError as exc:
        facts["repo_folder"], facts["repo_error"] = None, str(exc)
    if p["package_manager"] == "apt":
        try:
            apt_check(p["distribution"], p["source"])
            facts["install_error"] = None
        except DriverError as exc:
            facts["install_error"] = str(exc)
    if p["package_manager"] == "dnf":
        try:
            facts["dnf_install"], facts["install_error"] = dnf_install(
                facts["repo_folder"], p["branch"], p["open_modules"], p["kernel_modules"], p["source"]), None
        except DriverError as exc:
            facts["dnf_install"], facts["install_error"] = None, str(exc)
    module.exit_json(changed=False, ansible_facts={"nvidia_driver": facts})


if __name__ == "__main__":
    main()
