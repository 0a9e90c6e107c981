#!/bin/bash
# 50rackgate: the rackgate agent and its initramfs units, for image builders
# who bake them into a dracut initramfs instead of appending the fragment
# rackgated serves (docs/nodes.md, "A dracut module"). It installs exactly
# the fragment's contents (the agent bundle, the units under
# /usr/lib/systemd/system), so both ways boot the same units with the same
# agent; and the appliance CA, when given.
#
#   dracut --add rackgate ...          (also: add_dracutmodules+=" rackgate ")
#   RACKGATE_AGENT_BUNDLE  the fragment (default: the rackgate package's
#                          /usr/lib/rackgate/agent-initramfs.cpio.zst, or a
#                          copy of https://APPLIANCE:22623/v1/agent/initramfs)
#   RACKGATE_CA            the appliance CA to bake in as /etc/rackgate/ca.pem
#                          (default: none; append `rackgatectl pointer
#                          --initramfs-ca`'s part at boot instead)

rackgate_bundle() { echo "${RACKGATE_AGENT_BUNDLE:-/usr/lib/rackgate/agent-initramfs.cpio.zst}"; }

# Only when asked for (255), and only with a bundle to install.
check() {
  [ -r "$(rackgate_bundle)" ] || return 1
  require_binaries zstd cpio || return 1
  return 255
}

# The units order themselves against Ignition's (30ignition) and need the
# network up in the initramfs.
depends() {
  echo systemd network ignition
  return 0
}

install() {
  local bundle
  bundle=$(rackgate_bundle)
  # The fragment is a newc cpio of relative names (usr/...), root's, with
  # nothing outside its own prefix and rackgate-named units.
  if ! zstd -dc "$bundle" | (cd "$initdir" && cpio -idmu --quiet --no-absolute-filenames); then
    dfatal "rackgate: cannot unpack $bundle"
    return 1
  fi
  # ExecStartPre= and ExecStartPost= of the units (dracut's base module has them too).
  inst_multiple sh mkdir rm mount
  if [ -n "${RACKGATE_CA:-}" ]; then
    inst_simple "$RACKGATE_CA" /etc/rackgate/ca.pem || return 1
  fi
}
