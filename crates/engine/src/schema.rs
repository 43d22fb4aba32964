//! `dnscost-engine schema`: the JSON Schemas of the engine's input and output.

use dnscost_load::EngineConfig;
use dnscost_stats::Record;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct SchemaArgs {
    /// Write engine-config.schema.json and engine-record.schema.json into this directory
    /// instead of printing both to standard output.
    #[arg(long)]
    write: Option<PathBuf>,
}

/// The schemas, by file name.
pub fn schemas() -> Vec<(&'static str, String)> {
    let pretty = |s| serde_json::to_string_pretty(&s).expect("schema serialises") + "\n";
    vec![
        ("engine-config.schema.json", pretty(schemars::schema_for!(EngineConfig))),
        ("engine-record.schema.json", pretty(schemars::schema_for!(Record))),
        ("client-profile.schema.json", pretty(schemars::schema_for!(dnscost_load::ClientProfile))),
        ("capture-flow.schema.json", pretty(schemars::schema_for!(dnscost_capture::flows::Flow))),
    ]
}

pub fn main(args: SchemaArgs) -> Result<ExitCode, crate::EngineError> {
    if let Some(dir) = &args.write {
        std::fs::create_dir_all(dir).map_err(|e| crate::EngineError::file(dir, e))?;
    }
    for (name, text) in schemas() {
        match &args.write {
            Some(dir) => {
                let path = dir.join(name);
                std::fs::write(&path, text).map_err(|e| crate::EngineError::file(&path, e))?;
            }
            None => print!("{text}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
