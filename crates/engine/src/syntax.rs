//! How a script parses: the limits and keyword fixes every runbook engine applies, and the
//! engines that only parse (the REPL's, `prefetch`'s) apply too, so all of them read a script
//! the same way.

use rhai::Engine;

/// What decides how a script parses: its limits and `keyword_fixes`, and no optimising pass.
/// An engine with these and no functions parses as a runbook's engine does: `prefetch`
/// relies on it.
///
/// Rhai's default pass (`OptimizationLevel::Simple`: constants folded, dead code dropped) is a
/// third of a parse's time and most of what a runbook runs is calls into Rust, which it
/// leaves as they are: quick-check's five modules parse in 1.0 ms instead of 1.5 ms without it
/// (release, this machine), and the run is the same.
pub fn parse_settings(engine: &mut Engine) {
    engine.set_optimization_level(rhai::OptimizationLevel::None);
    // No interning: once Rhai's cache of names is full, each new name scans all of it to evict
    // one; parsing quick-check's five modules took a quarter longer with it (256 names).
    engine.set_max_strings_interned(0);
    // Runbooks nest maps and interpolated strings inside calls inside functions; the defaults
    // (64, 32) are tight for that, and this is still far from a parser stack overflow.
    engine.set_max_expr_depths(128, 96);
    engine.set_max_string_size(64 << 20);
    engine.set_max_array_size(10_000_000);
    engine.set_max_map_size(1_000_000);
    keyword_fixes(engine);
}

/// `until` is a Rhai keyword (`do … until`); after `::` or `.` it is a name: `wait::until`,
/// `query.until`.
fn keyword_fixes(engine: &mut Engine) {
    #[allow(deprecated)] // volatile, not deprecated
    engine.on_parse_token(|token, _, _| {
        thread_local!(static AFTER_PATH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
        let token = match token {
            rhai::Token::Until if AFTER_PATH.get() => rhai::Token::Identifier(Box::new("until".into())),
            other => other,
        };
        AFTER_PATH.set(matches!(token, rhai::Token::DoubleColon | rhai::Token::Period));
        token
    });
}
