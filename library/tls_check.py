#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Say whether a key and certificate are already what the gateway's TLS steps would make."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: tls_check
short_description: Read a key and its certificate and say what the gateway's TLS steps would change
description:
  - Reads a private key and its certificate once and lists, in words, what the community.crypto steps of the
    C(gateway) role would change about them, so that a converged host skips those steps.
  - The key must be an unencrypted ECC secp384r1 key with mode 0600 in a folder with mode 0700, the certificate
    must be for that key with mode 0644, both owned by the user the module runs as.
  - Without O(issuer_certificate) the certificate is the fleet CA's, self-signed, a critical CA:TRUE with path
    length 0, keyCertSign and cRLSign, permitting O(name_constraints) alone; the module then returns it.
  - With O(issuer_certificate) it is the server's, signed by that certificate, for O(common_name) and
    O(subject_alt_name), serverAuth alone, and still valid O(renew_days) from now.
  - Changes nothing.
version_added: "0.1.0"
author: vllm-fleet
requirements:
  - python cryptography 36 or later on the target
options:
  private_key:
    description: The private key's path.
    type: path
    required: true
  certificate:
    description: The certificate's path.
    type: path
    required: true
  common_name:
    description: The common name the certificate's subject must have.
    type: str
    required: true
  issuer_certificate:
    description: The PEM certificate that must have signed O(certificate); empty for a self-signed CA.
    type: str
    default: ""
  subject_alt_name:
    description: The certificate's subject alternative names, C(DNS:name) or C(IP:address).
    type: list
    elements: str
    default: []
  name_constraints:
    description: The CA's permitted subtrees, C(DNS:name) or C(IP:address/prefix).
    type: list
    elements: str
    default: []
  renew_days:
    description: How many days from now the certificate must still be valid.
    type: int
    default: 0
  absent:
    description: Paths that must not exist (the fleet CA's files on a gateway, say).
    type: list
    elements: path
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the fleet CA on the control node
  tls_check:
    private_key: ~/.local/share/vllm-fleet/gateway-ca/gw1-ca.key
    certificate: ~/.local/share/vllm-fleet/gateway-ca/gw1-ca.crt
    common_name: vllm-fleet CA
    name_constraints: ["DNS:gw1.example.net", "IP:10.0.0.5/32"]
  delegate_to: localhost
  register: ca

- name: Read the gateway's server certificate
  tls_check:
    private_key: /etc/nginx/vllm-fleet/server.key
    certificate: /etc/nginx/vllm-fleet/server.crt
    common_name: gw1.example.net
    subject_alt_name: ["DNS:gw1.example.net", "IP:10.0.0.5"]
    issuer_certificate: "{{ ca.certificate }}"
    renew_days: 30
    absent: [/etc/nginx/vllm-fleet/ca.key, /etc/nginx/vllm-fleet/ca.crt]
  when: ca.in_place
"""

RETURN = r"""
in_place:
  description: Whether nothing differs.
  returned: success
  type: bool
drift:
  description: What differs, in words; empty when in place.
  returned: success
  type: list
  elements: str
  sample: ["the server certificate ends 2027-01-02, within the 30-day renewal window"]
certificate:
  description: The certificate read (PEM), when it is a CA certificate that is in place.
  returned: when O(issuer_certificate) is empty and RV(in_place) is true
  type: str
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from ansible.module_utils.tls_state import drift
except ImportError as exc:  # the target has no cryptography
    drift, IMPORT_ERROR = None, exc


def main():
    module = AnsibleModule(
        argument_spec=dict(
            private_key=dict(type="path", required=True),
            certificate=dict(type="path", required=True),
            common_name=dict(type="str", required=True),
            issuer_certificate=dict(type="str", default=""),
            subject_alt_name=dict(type="list", elements="str", default=[]),
            name_constraints=dict(type="list", elements="str", default=[]),
            renew_days=dict(type="int", default=0),
            absent=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    if drift is None:
        module.fail_json(msg=missing_required_lib("cryptography"), exception=str(IMPORT_ERROR))
    found = drift(**module.params)
    result = dict(changed=False, in_place=not found, drift=found)
    if not found and not module.params["issuer_certificate"]:
        with open(module.params["certificate"]) as handle:
            result["certificate"] = handle.read()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
