use super::*;
use context_cascade::settings::flatten;
use context_cascade::tool_names::ToolPolicy;

fn error_of(text: &str) -> String {
    ProxyConfig::from_toml_str(text).unwrap_err().to_string()
}

#[test]
fn file_values_are_read() {
    let text = r#"
        listen = "127.0.0.1:9000"
        upstream = "http://up:8080/"
        [window]
        models = { "small" = 4096 }
        [state]
        path = ":memory:"
        [limits]
        upstream_timeout_secs = 5
        [summarizer]
        endpoint = "offline"
        [cascade.tools]
        compactable = ["my_reader"]
        [[model]]
        id = "custom"
        context_window = 65536
    "#;
    let c = ProxyConfig::from_toml_str(text).unwrap();
    assert_eq!(c.listen.port(), 9000);
    assert_eq!(c.upstream_base(), "http://up:8080");
    assert_eq!(c.window.models.get("small"), Some(&4096));
    assert_eq!(c.limits.upstream_timeout, Duration::from_secs(5));
    assert_eq!(c.state.path, PathBuf::from(IN_MEMORY_DB));
    assert_eq!(c.catalog.lookup("custom").context_window, 65536);
    assert_eq!(c.limits.max_request_bytes, DEFAULT_MAX_REQUEST_BYTES);
    assert_eq!(c.cascade.calibration.prior_tokens, 0.0);
    assert!(!c.cascade.layer1.compact_short_of_watermark);
    assert_eq!(c.cascade.recovery.preemptive_target, 0.45);
    let args = serde_json::json!({"file_path": "/a"});
    assert!(c.cascade.tools.is_compactable("my_reader", &args));
}

#[test]
fn cascade_keys_reach_the_cascade_config() {
    let text = "upstream = \"http://u\"\n[cascade.layer1]\ncompact_short_of_watermark = true\n\
                [cascade.recovery]\npreemptive_target = 0.75\n[cascade.tools]\nnever = [\"Read\"]";
    let c = ProxyConfig::from_toml_str(text).unwrap();
    assert!(c.cascade.layer1.compact_short_of_watermark);
    assert_eq!(c.cascade.recovery.preemptive_target, 0.75);
    assert_eq!(c.upstream, "http://u");
    let args = serde_json::json!({"file_path": "/a"});
    assert!(ToolPolicy::default().is_compactable("Read", &args));
    assert!(!c.cascade.tools.is_compactable("Read", &args));
    let bad_model = "[[model]]\nid = \"m\"\ncontext_window = 0";
    assert!(ProxyConfig::from_toml_str(bad_model).is_err());
    let unknown_in_model = "[[model]]\nid = \"m\"\ncontext_window = 9\nwindow = 1";
    assert!(error_of(unknown_in_model).contains("unknown field `window`"));
}

#[test]
fn a_bad_cascade_value_names_its_key_path() {
    let error = error_of("[cascade.recovery]\ntargets = [0.75, 1.3, 0.5]");
    assert_eq!(
        error,
        "cascade.recovery.targets[1] = 1.3: expected a share of E in (0, 1]"
    );
    assert!(
        error_of("[cascade.calibration]\nprior_tokens = -1")
            .contains("cascade.calibration.prior_tokens")
    );
    let error = error_of("[cascade.experimental]\nprepared_summary_gap = 1.0");
    assert!(
        error.contains("cascade.experimental.prepared_summary_gap"),
        "{error}"
    );
    let error = error_of("[summarizer]\nbackground_jobs = 0");
    assert!(error.contains("summarizer.background_jobs = 0"), "{error}");
    let error = error_of("[state]\nurl = \"postgres://x\"");
    assert!(error.contains("state.url"), "{error}");
}

#[test]
fn unknown_keys_name_the_key_and_line() {
    let error = error_of("upstream = \"http://u\"\n\nupstrem = \"x\"");
    assert!(error.contains("3:1: unknown field `upstrem`"), "{error}");
    assert!(!error.contains('\n'), "{error}");
    // A key of the old flat file.
    let error = error_of("preemptive_target = 0.75");
    assert!(
        error.contains("unknown field `preemptive_target`"),
        "{error}"
    );
    let error = error_of("[cascade.layer1]\nheadroom = 0.8");
    assert!(error.contains("2:1: unknown field `headroom`"), "{error}");
    assert!(error_of("[window]\nforce = 0").contains("window.force = 0"));
    assert!(error_of("[window.models]\nm = 0").contains("window.models.\"m\" = 0"));
}

#[test]
fn the_file_names_itself_in_errors() {
    let path = std::env::temp_dir().join(format!("cascade-config-{}.toml", std::process::id()));
    std::fs::write(&path, "[limits]\nmax_conections = 3\n").unwrap();
    let error = ProxyConfig::load(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(
        error.contains(&format!(
            "{}:2:1: unknown field `max_conections`",
            path.display()
        )),
        "{error}"
    );
}

#[test]
fn summarizer_keys_are_read() {
    let c = ProxyConfig::from_toml_str("[summarizer]\nendpoint = \"offline\"").unwrap();
    assert_eq!(c.summarizer.spec(), SummarizerSpec::Offline);
    assert_eq!(
        ProxyConfig::default().summarizer.spec(),
        SummarizerSpec::Offline
    );
    let text = "[summarizer]\nendpoint = \"http://x\"\nmodel = \"m\"\nprotocol = \"anthropic\"";
    let SummarizerSpec::Endpoint(e) = ProxyConfig::from_toml_str(text).unwrap().summarizer.spec()
    else {
        panic!("an endpoint")
    };
    assert_eq!(
        (e.provider, e.model.as_deref()),
        (Provider::Anthropic, Some("m"))
    );
    let error = error_of("[summarizer]\nprotocol = \"gemini\"");
    assert!(error.contains("gemini"), "{error}");
}

#[test]
fn a_file_round_trips() {
    let text = r#"
        listen = "127.0.0.1:9000"
        upstream = "http://up:8080"
        [window]
        force = 64000
        discover = false
        models = { "small" = 4096 }
        [state]
        url = "redis://127.0.0.1:6379/2"
        ttl_secs = 60
        [limits]
        body_read_timeout_secs = 9
        [summarizer]
        endpoint = "https://api.anthropic.com"
        background = false
        [requests]
        fast_path = false
        [cascade]
        remember = ["keep in mind"]
        [cascade.calibration]
        prior_tokens = 0
        observation_clamp = [0.5, 2.0]
        [[model]]
        id = "custom"
        context_window = 65536
    "#;
    let config = ProxyConfig::from_toml_str(text).unwrap();
    let written = toml::to_string(&config).unwrap();
    let again = ProxyConfig::from_toml_str(&written).unwrap();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&config).unwrap()
    );
    assert_eq!(again.state.ttl, Duration::from_secs(60));
    assert_eq!(again.catalog.lookup("custom").context_window, 65536);
}

#[test]
fn the_admin_token_is_read_but_never_written() {
    let c = ProxyConfig::from_toml_str("[status]\nadmin_token = \"abc\"").unwrap();
    assert_eq!(c.status.admin_token, Some(AdminToken::new("abc").unwrap()));
    let written = toml::to_string(&c).unwrap();
    assert!(
        !written.contains("abc") && written.contains("<hidden>"),
        "{written}"
    );
    assert!(ProxyConfig::from_toml_str("[status]\nadmin_token = \" \"").is_err());
}

#[test]
fn every_key_is_documented_and_at_most_ten_are_top_level() {
    assert!(ProxyConfig::keys().len() <= 10);
    let value = serde_json::to_value(ProxyConfig::default()).unwrap();
    let settings = flatten::<ProxyConfig>(&value);
    let undocumented: Vec<_> = settings.iter().filter(|s| s.doc.is_empty()).collect();
    assert!(undocumented.is_empty(), "{undocumented:?}");
    let paths: Vec<&str> = settings.iter().map(|s| s.path.as_str()).collect();
    for (flag, key) in FLAGS {
        assert!(
            paths.contains(key),
            "{flag} sets {key}, which the schema lacks"
        );
    }
}

#[test]
fn sources_are_told_apart() {
    let text = "upstream = \"http://u\"\n[cascade.layer1]\nheadroom_ratio = 0.75";
    let mut config = ProxyConfig::from_toml_str(text).unwrap();
    config.window.force = Some(1000);
    let settings = settings_with_sources(&config, Some(text), &["window.force"]);
    let source = |path: &str| settings.iter().find(|(s, _)| s.path == path).unwrap().1;
    assert_eq!(source("upstream"), Source::File);
    assert_eq!(source("cascade.layer1.headroom_ratio"), Source::File);
    assert_eq!(source("window.force"), Source::Flag);
    assert_eq!(source("cascade.layer1.low_watermark"), Source::Default);
}

#[test]
fn a_password_in_a_url_is_never_printed() {
    assert_eq!(
        redact_url("http://user:s3cret@up.example:8080/v1"),
        "http://user:***@up.example:8080/v1"
    );
    assert_eq!(
        redact_url("http://up.example:8080"),
        "http://up.example:8080"
    );
    assert_eq!(
        redact_url("redis://:pw@10.0.0.5:6379/0"),
        "redis://:***@10.0.0.5:6379/0"
    );
    assert_eq!(redact_url("http://u:p@[bad"), "http://***@[bad");
    let mut config = ProxyConfig::new("http://user:s3cret@up.example");
    config.state.url = Some("redis://:pw2@127.0.0.1:6379".into());
    config.summarizer.endpoint = "https://k:pw3@llm.example".into();
    let shown = serde_json::to_string(&config).unwrap();
    for secret in ["s3cret", "pw2", "pw3"] {
        assert!(!shown.contains(secret), "{shown}");
    }
}
