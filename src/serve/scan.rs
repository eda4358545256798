//! Which runbooks change the stack, found before they run.
//!
//! Watching must not change what it watches, so a serve job whose runbook calls a mutating
//! host function is refused when the jobs are loaded, unless the job says `mutating = true`.
//! This is a static scan of the runbook's AST and of every stdlib module it imports (and
//! theirs), for calls of the verbs that say they change the host (`functions::changing`: each
//! verb declares its effect where it is registered, so no list is kept here). It cannot see calls made through
//! `call(...)` or `Fn` pointers; those are stopped at run time by the host's choke point
//! (`Context::plan` refuses every mutating call of a watch-only run).

use std::collections::BTreeSet;

use rhai::{ASTNode, Expr, Stmt};

use opsbook_base::Error;
use opsbook_engine::catalog::Kind;
use opsbook_engine::runbook::Compiled;
use opsbook_fleet::Session;

/// One mutating call found: the function and where it is (`file:line:column`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub function: String,
    pub place: String,
}

fn calls(compiled: &Compiled, changing: &BTreeSet<String>, found: &mut Vec<Finding>) {
    let source = compiled.entry.source.clone();
    compiled.ast.walk(&mut |path: &[ASTNode]| {
        // A call used as a statement is a `Stmt::FnCall`, one inside an expression an `Expr::FnCall`.
        let call = match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(call, pos))) | Some(ASTNode::Stmt(Stmt::FnCall(call, pos))) => {
                Some((call, *pos))
            }
            _ => None,
        };
        if let Some((call, pos)) = call
            && !call.namespace.is_empty()
        {
            let function = format!("{}::{}", call.namespace, call.name);
            if changing.contains(&function) {
                let place = format!("{source}:{}:{}", pos.line().unwrap_or(0), pos.position().unwrap_or(0));
                found.push(Finding { function, place });
            }
        }
        true
    });
}

/// The mutating calls of a runbook and of the modules it imports, in source order.
pub(crate) fn mutating_calls(session: &Session, compiled: &Compiled) -> Result<Vec<Finding>, Error> {
    let changing = opsbook_engine::functions::changing(session.engine());
    let mut found = Vec::new();
    calls(compiled, &changing, &mut found);
    let mut pending: Vec<String> = compiled.imports.clone();
    let mut seen: Vec<String> = Vec::new();
    while let Some(name) = pending.pop() {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        // An import that is not a stdlib module fails at run time with its own message.
        let Ok(entry) = session.catalog.find(Kind::Module, &name) else { continue };
        let module = session.compile_entry(entry)?;
        calls(&module, &changing, &mut found);
        pending.extend(module.imports.iter().cloned());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mutating_calls_in_runbooks_and_their_modules() {
        let session = Session::new(
            opsbook_base::config::Config::defaults(),
            opsbook_world::World::real(&opsbook_base::config::Config::defaults()),
            std::sync::Arc::new(opsbook_engine::catalog::Catalog::new(&[])),
            opsbook_base::report::Mode::default(),
        );
        // The verifications change nothing (their module does not import the evidence made
        // after a change, which writes markers): serve may schedule them.
        for read_only in ["quick-check", "verify", "checklist"] {
            let runbook = session.compile(read_only).unwrap();
            assert_eq!(mutating_calls(&session, &runbook).unwrap(), vec![], "{read_only}");
        }
        let restart = session.compile("restart-all").unwrap();
        // The runbook's own calls first, in order; then its modules' (in no set order).
        let found: Vec<String> =
            mutating_calls(&session, &restart).unwrap().iter().map(|f| f.function.clone()).collect();
        assert_eq!(found[..3], ["unit::stop", "unit::restart", "unit::start"]);
        let mut from_modules = found[3..].to_vec();
        from_modules.sort();
        assert_eq!(from_modules, ["influx::ensure_bucket", "influx::write", "journal::emit", "loki::push"]);
    }
}
