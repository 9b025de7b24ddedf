//! `cascade models`: the built-in model catalog.

use context_cascade::catalog::Catalog;

use crate::chart::terminal_width;
use crate::error::CliError;
use crate::table::{Align, Table, thousands};

/// Flags of `cascade models`.
#[derive(Debug, clap::Args)]
pub(crate) struct ModelsArgs {
    /// Print the catalog as a JSON array instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Prints the catalog.
pub(crate) fn run(args: &ModelsArgs) -> Result<(), CliError> {
    let catalog = Catalog::builtin();
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(catalog.entries())
            .map_err(|e| CliError::write("<stdout>", e))?;
        json.push('\n');
        json
    } else {
        render(&catalog, terminal_width())
    };
    crate::input::write(None, text.as_bytes())
}

fn render(catalog: &Catalog, width: usize) -> String {
    let mut table = Table::new(&[
        ("id", Align::Left),
        ("window", Align::Right),
        ("match", Align::Left),
        ("token scale", Align::Right),
        ("note", Align::Left),
    ]);
    for entry in catalog.entries() {
        table.row(vec![
            entry.id.clone(),
            thousands(entry.context_window),
            if entry.prefix { "prefix" } else { "exact" }.to_owned(),
            entry
                .token_scale
                .map_or_else(|| "-".to_owned(), |s| format!("×{s:.2}")),
            entry.note.clone().unwrap_or_default(),
        ]);
    }
    format!(
        "{} models; unknown models get {} tokens.\n\n{}",
        catalog.entries().len(),
        thousands(context_cascade::catalog::DEFAULT_CONTEXT_WINDOW),
        table.render(width)
    )
}
