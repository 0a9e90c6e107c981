// `rackgatectl ca rotate --appliance STAGE` and `rackgatectl ca bundle
// --appliance`: the appliance CA's rotation with an overlap
// (docs/operations.md, "Rotating the appliance CA"). Offline commands on the
// state directory and the fleet's store, run in rackgatectl-state.
#ifndef RACKGATE_CTL_STATE_APPLIANCE_CA_ROTATION_H_
#define RACKGATE_CTL_STATE_APPLIANCE_CA_ROTATION_H_

namespace rackgate::ctl {

// argv[first] is "rotate" or "bundle". Exit 0 done; 1 refused (the reason
// on stderr); 2 unusable input or state.
int RunApplianceCa(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_STATE_APPLIANCE_CA_ROTATION_H_
