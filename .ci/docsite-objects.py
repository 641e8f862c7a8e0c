"""Write a Sphinx intersphinx inventory (objects.inv v2) with the docs.ansible.com labels the
generated collection pages link to, so the docsite builds offline with -W and the links stay right."""
import sys
import zlib

LABELS = {
    "ansible_configuration_settings": ("reference_appendices/config.html#ansible-configuration-settings",
                                       "Ansible Configuration Settings"),
    # a module with an action plugin (validate_node) links to the action plugins page
    "action_plugins": ("plugins/action.html#action-plugins", "Action plugins"),
    "callback_plugins": ("plugins/callback.html#callback-plugins", "Callback plugins"),
    # validate_node's group options say they work as ansible.builtin.group_by does
    "ansible_collections.ansible.builtin.group_by_module": (
        "collections/ansible/builtin/group_by_module.html#ansible-collections-ansible-builtin-group-by-module",
        "ansible.builtin.group_by module - Create Ansible groups based on facts"),
    "common_return_values": ("reference_appendices/common_return_values.html#common-return-values", "Return Values"),
}
header = b"# Sphinx inventory version 2\n# Project: Ansible\n# Version: devel\n# The remainder of this file is compressed using zlib.\n"
body = "".join("%s std:label -1 %s %s\n" % (name, uri, title) for name, (uri, title) in sorted(LABELS.items()))
with open(sys.argv[1], "wb") as handle:
    handle.write(header + zlib.compress(body.encode()))
