// rackgatectl ca rotate --cluster STAGE and ca bundle --cluster: the cluster
// CA's rotation in signer mode, per appliance, in STATE/cluster-ca/
// (docs/operations.md, "Rotating the cluster CA"; the file names and stages
// are core/signer.h's ClusterCaFiles and ClusterCaStage). Each stage is one
// audit row in the store (ca_rotation_prepared|switched|retired, detail
// {"kind": "cluster", ...}).
#ifndef RACKGATE_CTL_STATE_CLUSTER_CA_ROTATION_H_
#define RACKGATE_CTL_STATE_CLUSTER_CA_ROTATION_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace rackgate::ctl {

// Where prepare takes the next CA from: a new lab CA (generate) or the
// cluster's own new CA, imported from PEM files and checked as `ca import`
// checks (csr::ValidateClusterCa).
struct NextClusterCa {
  bool generate = false;
  std::string name;  // generate: its common name
  int days = 3650;   // generate: its validity
  std::string cert;  // import: the files
  std::string key;
};

// The file steps on the cluster CA directory `dir`, without the store. Each
// refusal changes nothing. Every refusal is kInvalidArgument unless said.
//
// prepare: next.{crt,key} beside ca.*. ca_rotation_in_progress when a
// rotation runs (next.crt or previous.crt there); ca_invalid when the next
// CA has the current CA's key; what csr::ValidateClusterCa refuses; kIoError
// file_unreadable without a current CA, file_unwritable.
Status PrepareClusterCaFiles(const std::string& dir, const NextClusterCa& next);
// switch: ca.* becomes previous.*, next.* becomes ca.* (renames, the key
// before its certificate; an interrupted switch is finished by running it
// again). ca_rotation_none without a prepared CA; ca_rotation_stage once
// switched; ca_next_missing when next.key is gone; ca_next_mismatch when
// next.key is not next.crt's key or the next CA is no longer usable.
Status SwitchClusterCaFiles(const std::string& dir);
// retire: previous.* moves to retired/<YYYYmmddTHHMMSSZ of now>/ca.*; the
// path of that directory. ca_rotation_none when no rotation runs;
// ca_rotation_stage before the switch.
Result<std::string> RetireClusterCaFiles(const std::string& dir, int64_t now);

// rackgatectl ca rotate --cluster ... and ca bundle --cluster ...; `sub` is
// "rotate" or "bundle", argv[first] the first argument after it. Returns the
// exit code: 0 done, 1 refused, 2 unusable input.
int RunClusterCaRotation(const std::string& sub, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_STATE_CLUSTER_CA_ROTATION_H_
