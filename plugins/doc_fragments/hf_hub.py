# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options shared by the modules that talk to a Hugging Face hub or fleet mirror."""
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  repo:
    description: C(org/name) of the model.
    type: str
    required: true
  endpoint:
    description: The hub or fleet mirror; empty for huggingface.co.
    type: str
    default: ""
  token:
    description: Access token for gated or private repositories.
    type: str
    default: ""
  allow_patterns:
    description: Only files matching one of these glob patterns.
    type: list
    elements: str
    default: []
"""
