//! The `.filesystem/` store: version snapshots, move and delete logs, and the trash.
