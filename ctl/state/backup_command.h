// rackgatectl backup and restore: an appliance's store, keys, config and EK
// anchors in one archive, and back (docs/operations.md, "Backups and
// restore").
#ifndef RACKGATE_CTL_STATE_BACKUP_COMMAND_H_
#define RACKGATE_CTL_STATE_BACKUP_COMMAND_H_

namespace rackgate::ctl {

// rackgatectl backup --out FILE [--config FILE] [--state-dir DIR] [--json]
// (argv[first] is the word after `backup`). Online: rackgated keeps running.
int RunBackup(int argc, char** argv, int first);

// rackgatectl restore --from FILE [--state-dir DIR] [--config-out FILE]
// [--rebase DIR] [--force] [--json]. Exit 0 restored; 1 refused
// (backup_damaged, backup_foreign, backup_newer, restore_target_not_empty,
// db_in_use); 2 unusable input.
int RunRestore(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_STATE_BACKUP_COMMAND_H_
