//! The committed JSON Schemas (`schemas/`) are the ones the engine prints.

use std::process::Command;

#[test]
fn committed_schemas_are_current() {
    let dir = std::env::temp_dir().join(format!("dnscost-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let status =
        Command::new(env!("CARGO_BIN_EXE_dnscost-engine")).args(["schema", "--write"]).arg(&dir).status().unwrap();
    assert!(status.success());
    let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    for name in [
        "engine-config.schema.json",
        "engine-record.schema.json",
        "client-profile.schema.json",
        "capture-flow.schema.json",
    ] {
        let fresh = std::fs::read_to_string(dir.join(name)).unwrap();
        let old = std::fs::read_to_string(committed.join(name)).unwrap_or_default();
        assert!(fresh == old, "schemas/{name} is stale: run `dnscost-engine schema --write schemas`");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
