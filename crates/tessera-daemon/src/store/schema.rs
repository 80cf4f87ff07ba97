//! The schema of the state database and its history: which version a database has, and how
//! one of an earlier version is upgraded (or refused, naming both versions) at open.

use super::db_err;
use super::tables::{DENTRIES, META, Tables};
use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use std::path::Path;
use tessera_core::{Errno, FsError, FsResult};

/// Version of the layout of the database's tables and values (`meta["schema"]`). Checked at
/// every start: a database of another version is refused with both versions named. A
/// database from before the version was recorded has the layout of version 1.
///
/// 2: ownership rows are runs (`owner_runs`), not extents.
/// 3: transactions' pending state and decision records (`pending_runs`, `pending_sizes`,
///    `prepared`, `home_txns`); a version 2 database is upgraded by adding them empty.
/// 4: the catalogue of variables (`cat_versions`, `cat_next`, `cat_pending`) and the entries
///    of files transactions create (`pending_dentries`); a version 2 or 3 database is
///    upgraded by adding the tables it lacks, empty.
/// 5: the files transactions truncate (`pending_cuts`), the names they rename
///    (`pending_moves`), and extended attributes (`xattrs`); upgraded from 2 to 4 the same
///    way.
/// 6: link counts (`links`); upgraded from 2 to 5 the same way (inode rows are unchanged:
///    they never held a count).
/// 7: operations on names spanning shards (`name_intents`, `name_steps`); upgraded from 2 to
///    6 the same way, marking the names to be checked once against the link counts
///    (`meta["names_unchecked"]`).
/// 8: removed files whose bytes are released in the background (`files_to_drop`); upgraded
///    from 2 to 7 the same way.
/// 9: the node's logs are in index format 3 (every record names its file, so that one log can
///    hold many files). The database is unchanged; one of versions 2 to 8 is upgraded the same
///    way when the node holds no logs, and refused when it does (their index format 2 is not
///    read).
pub const STATE_SCHEMA_VERSION: u64 = 9;
pub(super) const SCHEMA_KEY: &str = "schema";

/// Set in `meta` when a database is upgraded from before schema 7: its names are checked
/// against their files' link counts once (a crash in a rename could leave a name more).
pub(super) const NAMES_UNCHECKED_KEY: &str = "names_unchecked";

/// Whether the node directory `dir` holds any log (of any file or process).
fn holds_logs(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("logs")).is_ok_and(|mut d| d.next().is_some())
}

/// Checks the schema version of the database of the node directory `dir` in `txn`, upgrades
/// one of an earlier version it can read, records the current version, and creates every
/// table the database lacks; refuses a database it cannot read, naming both versions and
/// what to do.
pub(super) fn prepare(dir: &Path, txn: &WriteTransaction) -> FsResult<()> {
    // Unversioned and not empty: written before versions were recorded.
    let unversioned = {
        let dentries = txn
            .open_table(DENTRIES)
            .map_err(|e| db_err("dentries", e))?;
        if dentries.len().map_err(|e| db_err("dentries", e))? > 0 {
            1
        } else {
            STATE_SCHEMA_VERSION
        }
    };
    let mut meta = txn.open_table(META).map_err(|e| db_err("meta", e))?;
    let found = meta
        .get(SCHEMA_KEY)
        .map_err(|e| db_err("meta", e))?
        .map_or(unversioned, |v| v.value());
    match found {
        2..=8 if holds_logs(dir) => {
            return Err(FsError::new(
                Errno::Io,
                format!(
                    "{}: this burst buffer holds logs in index format 2, written by an earlier Tessera (state schema version {found}); this build reads index format 3 (state schema version {STATE_SCHEMA_VERSION}) and does not convert logs: flush the files with the Tessera that wrote them (`tessera flush`), then start this node on a fresh burst buffer",
                    dir.join("logs").display()
                ),
            ));
        }
        // Versions 2 to 7 lack only tables, created below; 8 lacks nothing.
        2..=8 | STATE_SCHEMA_VERSION => {
            meta.insert(SCHEMA_KEY, STATE_SCHEMA_VERSION)
                .map_err(|e| db_err("meta", e))?;
            // An earlier build's renames could leave a name more than the count.
            if found < 7 {
                meta.insert(NAMES_UNCHECKED_KEY, 1)
                    .map_err(|e| db_err("meta", e))?;
            }
        }
        v => {
            return Err(FsError::new(
                Errno::Io,
                format!(
                    "{}: state database schema version {v}; this build reads version {STATE_SCHEMA_VERSION}: run the Tessera that wrote it, or start this node on a fresh burst buffer",
                    dir.join("meta.redb").display()
                ),
            ));
        }
    }
    drop(meta);
    Tables::open(txn).map_err(|e| db_err("creating tables", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::tests::opts;
    use tessera_proto::FileKind;
    use tessera_proto::config::StateDurability;

    /// Writes `version` as the schema of the database in `dir`.
    fn set_schema(dir: &Path, version: u64) {
        let db = redb::Database::open(dir.join("meta.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(SCHEMA_KEY, version)
            .unwrap();
        txn.commit().unwrap();
    }

    #[test]
    fn a_version_8_node_is_upgraded_without_logs_and_refused_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        store.close();
        set_schema(dir.path(), 8);
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Process))
            .expect("a version 8 node without logs is upgraded");
        store.close();
        set_schema(dir.path(), 8);
        std::fs::create_dir(dir.path().join("logs/00000000000000a1")).unwrap();
        let e = Store::open(dir.path(), opts(StateDurability::Process))
            .err()
            .expect("opened a version 8 node holding logs");
        assert!(
            e.message.contains("index format 2") && e.message.contains("tessera flush"),
            "{e}"
        );
    }

    #[test]
    fn a_database_of_another_schema_version_is_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        store.close();
        {
            let db = redb::Database::open(dir.path().join("meta.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(META).unwrap();
                assert_eq!(
                    meta.get(SCHEMA_KEY).unwrap().map(|v| v.value()),
                    Some(STATE_SCHEMA_VERSION),
                    "a new database records its schema version"
                );
                meta.insert(SCHEMA_KEY, 99).unwrap();
            }
            txn.commit().unwrap();
        }
        let e = Store::open(dir.path(), opts(StateDurability::Process))
            .err()
            .expect("opened a database of schema version 99");
        assert!(
            e.message.contains("schema version 99")
                && e.message
                    .contains(&format!("reads version {STATE_SCHEMA_VERSION}")),
            "{e}"
        );
    }

    #[test]
    fn an_unversioned_database_with_entries_is_schema_1() {
        let dir = tempfile::tempdir().unwrap();
        {
            // What a build from before schema versions left: entries, no "schema" key.
            let db = redb::Database::create(dir.path().join("meta.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(DENTRIES)
                .unwrap()
                .insert(("/", "f"), [0u8].as_slice())
                .unwrap();
            txn.commit().unwrap();
        }
        let e = Store::open(dir.path(), opts(StateDurability::Process))
            .err()
            .expect("opened an unversioned database with entries");
        assert!(e.message.contains("schema version 1;"), "{e}");
    }

    /// A database as a schema-2 build left it, written with that schema's own table layout
    /// (frozen here, apart from the current list): a directory, a file with two owner runs,
    /// and no table that later schemas added.
    fn schema_2_fixture(dir: &Path) {
        use redb::TableDefinition;
        const DENTRIES_2: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("dentries");
        const INODES_2: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
        /// (len, stride, count, node, client).
        type OwnerRow2 = (u64, u64, u64, u32, u64);
        const OWNER_RUNS_2: TableDefinition<(u64, u64, u64), OwnerRow2> =
            TableDefinition::new("owner_runs");
        const META_2: TableDefinition<&str, u64> = TableDefinition::new("meta");
        let attr = |ino, kind, size| crate::store::StoredAttr {
            ino,
            kind,
            mode: 0o644,
            uid: 1000,
            gid: 1000,
            size,
            atime_ns: 1,
            mtime_ns: 2,
            ctime_ns: 3,
        };
        let db = redb::Database::create(dir.join("meta.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut dentries = txn.open_table(DENTRIES_2).unwrap();
            let mut inodes = txn.open_table(INODES_2).unwrap();
            let mut owners = txn.open_table(OWNER_RUNS_2).unwrap();
            let mut meta = txn.open_table(META_2).unwrap();
            for (parent, name, ino, kind) in [
                ("/", "run", 2, FileKind::Dir),
                ("/run", "data", 3, FileKind::File),
            ] {
                let dentry = tessera_proto::Dentry { ino, kind };
                dentries
                    .insert(
                        (parent, name),
                        tessera_proto::frame::encode(&dentry).as_slice(),
                    )
                    .unwrap();
                let size = if kind == FileKind::File { 4096 } else { 0 };
                inodes
                    .insert(
                        ino,
                        tessera_proto::frame::encode(&attr(ino, kind, size)).as_slice(),
                    )
                    .unwrap();
            }
            // A strided run of 4 pieces and a single extent, owned by two clients.
            owners.insert((3, 0, 0), (512, 1024, 4, 1, 7)).unwrap();
            owners.insert((3, 0, 512), (512, 512, 1, 2, 8)).unwrap();
            meta.insert(SCHEMA_KEY, 2).unwrap();
            meta.insert("next_ino", 4).unwrap();
            meta.insert("next_client", 9).unwrap();
        }
        txn.commit().unwrap();
    }

    #[tokio::test]
    async fn a_schema_2_database_is_upgraded_and_keeps_its_rows() {
        use tessera_core::{Owner, Run};
        let dir = tempfile::tempdir().unwrap();
        schema_2_fixture(dir.path());
        let (store, loaded) = Store::open(dir.path(), opts(StateDurability::Process))
            .expect("a schema-2 database is upgraded");
        let mut names: Vec<_> = loaded
            .dentries
            .iter()
            .map(|(p, n, d)| (p.as_str(), n.as_str(), d.ino))
            .collect();
        names.sort();
        assert_eq!(names, [("/", "run", 2), ("/run", "data", 3)]);
        let file = loaded.inodes.iter().find(|a| a.ino == 3).expect("inode 3");
        assert_eq!((file.size, file.nlink, file.uid), (4096, 1, 1000));
        assert_eq!(
            loaded.owners,
            vec![
                (
                    3,
                    0,
                    Run {
                        start: 0,
                        len: 512,
                        stride: 1024,
                        count: 4
                    },
                    Owner { node: 1, client: 7 }
                ),
                (3, 0, Run::single(512, 512), Owner { node: 2, client: 8 }),
            ]
        );
        assert_eq!((loaded.next_ino, loaded.next_client), (4, 9));
        assert!(
            loaded.names_unchecked,
            "names from before schema 7 are to be checked against their link counts"
        );
        // The tables schema 2 lacked were created: a row of one of them persists.
        store
            .submit(vec![crate::store::DbOp::PutLinks { ino: 3, nlink: 2 }])
            .durable()
            .await
            .unwrap();
        store.close();
        let (store, loaded) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        store.close();
        let file = loaded.inodes.iter().find(|a| a.ino == 3).expect("inode 3");
        assert_eq!(file.nlink, 2);
        let db = redb::Database::open(dir.path().join("meta.redb")).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let meta = txn.open_table(META).unwrap();
        assert_eq!(
            meta.get(SCHEMA_KEY).unwrap().map(|v| v.value()),
            Some(STATE_SCHEMA_VERSION),
            "the upgrade records the current version"
        );
    }
}
