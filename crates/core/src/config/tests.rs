use super::*;
use crate::settings::{Setting, flatten};

fn read(text: &str) -> Result<CascadeConfig, String> {
    toml::from_str::<CascadeConfig>(text).map_err(|e| e.to_string())
}

#[test]
fn the_default_is_valid_and_its_measured_choices_are_in_place() {
    let config = CascadeConfig::default();
    assert_eq!(config.validate(), Ok(()));
    assert_eq!(config.calibration.prior_tokens, 0.0);
    assert!(!config.layer1.compact_short_of_watermark);
    assert_eq!(config.recovery.preemptive_target, 0.45);
    assert_eq!(config.layer1.low_watermark, 0.45);
    assert_eq!(config.recovery.targets, [0.75, 0.6, 0.5]);
    assert_eq!(config.experimental.prepared_summary_gap, 0.0);
}

#[test]
fn an_unknown_key_is_an_error_naming_it() {
    let error = read("[recovery]\ntarget = [0.7, 0.6, 0.5]").unwrap_err();
    assert!(error.contains("unknown field `target`"), "{error}");
    let error = read("headroom_ratio = 0.8").unwrap_err();
    assert!(error.contains("unknown field `headroom_ratio`"), "{error}");
    let error = read("[trail]\nbudget = 3").unwrap_err();
    assert!(error.contains("unknown field `budget`"), "{error}");
    let error = read("[tools]\ncompactible = [\"x\"]").unwrap_err();
    assert!(error.contains("unknown field `compactible`"), "{error}");
}

#[test]
fn a_bad_value_names_its_key_path() {
    let config = read("[recovery]\ntargets = [0.75, 1.3, 0.5]").unwrap();
    let error = config.validate().unwrap_err();
    assert_eq!(
        error.to_string(),
        "recovery.targets[1] = 1.3: expected a share of E in (0, 1]"
    );
    let cases = [
        ("[layer1]\nlow_watermark = 0.8", "layer1.low_watermark"),
        (
            "[calibration]\nprior_tokens = -1",
            "calibration.prior_tokens",
        ),
        (
            "[calibration]\nobservation_clamp = [4.0, 0.25]",
            "calibration.observation_clamp",
        ),
        (
            "[background]\nsummary_ratio = 0.95",
            "background.summary_ratio",
        ),
        ("[background]\nforecasts = 0", "background.forecasts"),
        (
            "[experimental]\nprepared_summary_gap = 1.0",
            "experimental.prepared_summary_gap",
        ),
        ("[recovery]\nmax_calls = 0", "recovery.max_calls"),
        ("[weights]\nletter = -0.1", "weights.letter"),
    ];
    for (text, key) in cases {
        let error = read(text).unwrap().validate().unwrap_err();
        assert_eq!(error.key, key, "{text}");
    }
}

#[test]
fn a_file_round_trips_through_the_schema() {
    let text = "remember = [\"note this\"]\n[tools]\ncompactable = [\"MyReader\"]\nnever = [\"Read\"]\n\
                [layer1]\ncompact_short_of_watermark = true\n[calibration]\nprior_tokens = 0\n";
    let config = read(text).unwrap();
    assert!(config.layer1.compact_short_of_watermark);
    assert_eq!(config.calibration.prior_tokens, 0.0);
    let args = serde_json::json!({"file_path": "/a"});
    assert!(!config.tools.is_compactable("Read", &args));
    assert!(config.tools.is_compactable("my_reader", &args));
    assert!(config.remember.is_remember_request("Please note this: x"));
    let written = toml::to_string(&config).unwrap();
    let again = read(&written).unwrap();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&config).unwrap()
    );
}

#[test]
fn every_key_has_a_doc_line_and_every_doc_a_key() {
    let value = serde_json::to_value(CascadeConfig::default()).unwrap();
    let settings = flatten::<CascadeConfig>(&value);
    let undocumented: Vec<&Setting> = settings.iter().filter(|s| s.doc.is_empty()).collect();
    assert!(undocumented.is_empty(), "{undocumented:?}");
    let unset: Vec<&Setting> = settings.iter().filter(|s| s.value.is_none()).collect();
    assert!(
        unset.is_empty(),
        "documented keys the schema lacks: {unset:?}"
    );
    let top = CascadeConfig::keys();
    assert!(top.len() <= 10, "{} top-level settings", top.len());
    let headroom = settings
        .iter()
        .find(|s| s.path == "layer1.headroom_ratio")
        .unwrap();
    assert_eq!(headroom.value.as_deref(), Some("0.75"));
}
