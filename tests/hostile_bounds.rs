//! Hostile input, round three (#50 cases 12–14): what a few bytes of input can ask for is
//! bounded — hosts named by ranges, a runbook's memory, the depth of a value printed — and the
//! bound is said in words. Whole outputs compared; each class has a seeded generator over
//! shapes that would have found its case.

use std::time::{Duration, Instant};

use crate::support::Test;

use crate::support::seeded::Seeded;

#[test]
fn host_ranges_naming_more_than_an_inventory_may_hold_are_refused_at_once() {
    let t = Test::new().file("inv.ini", "[web]\na[1:100000]\nb[1:100000]\nc[1:100000]\n");
    let started = Instant::now();
    let out = t.run_in_place(&["hosts", "web", "--inventory", "inv.ini"]);
    assert_eq!(
        (out.0, out.1.as_str(), out.2.as_str()),
        (
            2,
            "",
            "error: `b[1:100000]` would bring the inventory to 200000 hosts; an inventory may name at most 100000 \
             (split the fleet into several inventories)\n --> inv.ini:3:1\n  |\n3 | b[1:100000]\n  | ^\n"
        )
    );
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());

    // Ranges of any sizes, in any groups: past 100,000 hosts in all, the line that crosses is named.
    let mut rng = Seeded(0x005e_ed50);
    for case in 0..8 {
        let mut text = String::new();
        let (mut total, mut crossing) = (0u64, None);
        for line in 0..(2 + rng.below(4)) {
            let size = 20_000 + rng.below(60_000);
            let range = format!("h{case}x{line}[1:{size}]");
            text.push_str(&format!("[g{}]\n{range}\n", rng.below(3)));
            total += size;
            if total > 100_000 && crossing.is_none() {
                crossing = Some((range, total, 2 * line + 2));
            }
        }
        let t = Test::new().file("inv.ini", &text);
        let out = t.run_in_place(&["hosts", "--inventory", "inv.ini"]);
        match crossing {
            Some((range, total, line)) => assert_eq!(
                (out.0, out.2.lines().next().unwrap_or_default(), out.2.lines().nth(1).unwrap_or_default()),
                (
                    2,
                    format!(
                        "error: `{range}` would bring the inventory to {total} hosts; an inventory may name at most \
                         100000 (split the fleet into several inventories)"
                    )
                    .as_str(),
                    format!(" --> inv.ini:{line}:1").as_str()
                ),
                "{text}"
            ),
            None => assert_eq!(out.0, 0, "{text}: {}", out.2),
        }
    }
}

/// A runbook filling a container with 32 MiB strings in `shape` (`{C}`: the container, `{V}`:
/// the value), a hundred times (3.2 GiB).
fn filling(shape: &str) -> String {
    let fill = shape.replace("{V}", "s + i");
    format!(
        "let s = \"x\";\nfor i in 0..25 {{ s += s; }}\nlet m = #{{}};\nlet a = [#{{}}];\nfor i in 0..100 {{ {fill}; }}\n"
    )
}

#[test]
fn a_map_of_large_strings_is_stopped_in_words_before_memory_runs_out() {
    let t = Test::new().runbook("bigmap", &filling("m[`k${i}`] = {V}"));
    let out = t.run_in_place(&["run", "bigmap", "--timeout", "120s"]);
    assert_eq!(
        (out.0, crate::support::mask(&out.1).as_str(), out.2.as_str()),
        (
            1,
            "bigmap (runbooks/bigmap.rhai)\n\naborted: the run held more than 2 GiB of memory and was stopped (a map \
             or a string growing without end?) (at runbooks/bigmap.rhai:5:21)\n\n0 passed, 0 failed  ([DUR])\n",
            ""
        )
    );
    // Other shapes of the same growth: each is stopped by Rhai's own size limits or by the
    // heap's bound, never by the kernel (exit 1 or 2 with words, not a signal).
    let shapes = ["m.x = m.x + {V}", "a[0][`k${i}`] = {V}", "m[`k${i}`] = [{V}]", "a.push(#{v: {V}})"];
    let mut rng = Seeded(0x3a9);
    for _ in 0..2 {
        let shape = shapes[rng.below(shapes.len() as u64) as usize];
        let source = filling(shape).replace("let m = #{};", "let m = #{x: \"\"};");
        let t = Test::new().runbook("grow", &source);
        let out = t.run_in_place(&["run", "grow", "--timeout", "120s"]);
        assert!(matches!(out.0, 1 | 2), "{shape}: exit {} {}{}", out.0, out.1, out.2);
        let said = format!("{}{}", out.1, out.2);
        assert!(said.contains("more than 2 GiB of memory") || said.contains("too large"), "{shape}: {said}");
    }
}

/// A YAML inventory whose `web1` has `ansible_host: "{{ LAST }}"`, and variables chained from
/// `v0` (`base` bytes): each `vN` is `v(N-1)` concatenated `times` times.
fn jinja_chain(base: usize, times: usize, links: usize) -> String {
    let mut text = format!("all:\n  hosts:\n    web1:\n      ansible_host: \"{{{{ v{links} }}}}\"\n  vars:\n");
    text.push_str(&format!("    v0: \"{}\"\n", "x".repeat(base)));
    for n in 1..=links {
        let terms = vec![format!("v{}", n - 1); times].join(" ~ ");
        text.push_str(&format!("    v{n}: \"{{{{ {terms} }}}}\"\n"));
    }
    text
}

/// What a host's `ansible_host` resolved through `v{links}` … `v{from}` says, `v{from}` failing.
fn chain_error(links: usize, from: usize) -> String {
    let uses: String = (from..=links).rev().map(|n| format!("it uses `v{n}`, which cannot be resolved: ")).collect();
    format!("error: host `web1`: `ansible_host` (inv.yml:4 (host var)) cannot be resolved: {uses}")
}

#[test]
fn an_inventory_jinja_chain_is_refused_past_a_mebibyte_naming_the_variable() {
    // The shape: ten links of eight; without a bound, gigabytes and an abort.
    let t = Test::new().file("inv.yml", &jinja_chain(64, 8, 10));
    let started = Instant::now();
    let out = t.run_in_place(&["repl", "--host", "web1", "--inventory", "inv.yml"]);
    let too_large = "its rendered text is larger than 1 MiB, the most an inventory value may hold (a chain of \
                     templates repeating each other?)\n";
    assert_eq!((out.0, out.1.as_str(), out.2), (2, "", format!("{}{too_large}", chain_error(10, 5))));
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());

    // Chains of other sizes: the first value past 1 MiB is named, whatever stops it (its
    // size, or the work of making it); a chain that stays below resolves.
    let out_of_fuel = "rendering it did more work than an inventory value may (more than 1000000 steps of 64 bytes \
                       each: a loop or a chain of templates growing without end?)\n";
    let mut rng = Seeded(0x0050_0012);
    for _ in 0..8 {
        let (base, times, links) =
            (1 + rng.below(2000) as usize, 2 + rng.below(7) as usize, 1 + rng.below(10) as usize);
        let crossing = (0..=links).find(|&n| base * times.pow(n as u32) > 1 << 20);
        let t = Test::new().file("inv.yml", &jinja_chain(base, times, links));
        let out = t.run_in_place(&["repl", "--host", "web1", "--inventory", "inv.yml"]);
        let case = format!("{base} bytes, {times} times, {links} links");
        match crossing {
            Some(n) => {
                let said = out.2.strip_prefix(&chain_error(links, n));
                assert_eq!(out.0, 2, "{case}: {}", out.2);
                assert!(said == Some(too_large) || said == Some(out_of_fuel), "{case}: {}", out.2);
            }
            None => assert!(!out.2.contains("cannot be resolved"), "{case}: {}", out.2),
        }
    }
}

/// A runbook rendering `template` with `s`, a string of 1 KiB.
fn rendering(template: &str) -> String {
    format!(
        "let s = \"x\"; for i in 0..10 {{ s += s; }}\nlet t = template::render_string(\"{template}\", #{{s: s}});\n"
    )
}

#[test]
fn a_template_render_is_bounded_in_output_and_in_work() {
    let t = Test::new().runbook("big", &rendering("{% for i in range(100000) %}{{ s }}{% endfor %}"));
    let out = t.run_in_place(&["run", "big", "--timeout", "60s"]);
    assert_eq!(
        (out.0, crate::support::mask(&out.1).as_str(), out.2.as_str()),
        (
            1,
            "big (runbooks/big.rhai)\n\naborted: template `<string>` rendered more than 16 MiB, the most a template may \
             (a loop or a concatenation growing without end?)\n --> <string>\n\n0 passed, 0 failed  ([DUR])\n",
            ""
        )
    );
    let chain: String =
        (1..10).map(|_| format!("{{% set s = {} %}}", ["s"; 8].join(" ~ "))).chain(["{{ s }}".into()]).collect();
    let t = Test::new().runbook("chain", &rendering(&chain));
    let started = Instant::now();
    let out = t.run_in_place(&["run", "chain", "--timeout", "60s"]);
    let first_line = out.1.lines().nth(2).unwrap_or_default();
    assert_eq!(
        (out.0, first_line),
        (
            1,
            "aborted: template `<string>` did more work than a template may (more than 4000000 steps of 64 bytes each: \
             a loop or a concatenation growing without end?)"
        ),
        "{}",
        out.1
    );
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());

    // Shapes of growth, seeded: each is refused in words (its output or its work), quickly.
    let shapes = [
        "{% for i in range(N) %}{% for j in range(N) %}{{ s }}{% endfor %}{% endfor %}",
        "{% for i in range(N) %}{% for j in range(N) %}{% endfor %}{% endfor %}",
        "{% set ns = namespace(t='') %}{% for i in range(N) %}{% set ns.t = ns.t ~ s %}{% endfor %}{{ ns.t }}",
        "{{ s * N * N }}",
    ];
    let mut rng = Seeded(0x0050_0002);
    for _ in 0..4 {
        let shape =
            shapes[rng.below(shapes.len() as u64) as usize].replace('N', &(20_000 + rng.below(80_000)).to_string());
        let t = Test::new().runbook("grow", &rendering(&shape));
        let out = t.run_in_place(&["run", "grow", "--timeout", "60s"]);
        let said = out.1.lines().nth(2).unwrap_or_default();
        assert_eq!(out.0, 1, "{shape}: {}{}", out.1, out.2);
        assert!(
            said.starts_with("aborted: template `<string>` rendered more than 16 MiB")
                || said.starts_with("aborted: template `<string>` did more work than a template may")
                || said.contains("is too large"),
            "{shape}: {}",
            out.1
        );
    }
}

/// An INI inventory chaining `groups` groups by `[gN:children]`, listed in the chain's order
/// or `reversed`, `h1` in the last.
fn group_chain(groups: usize, reversed: bool) -> String {
    let mut sections: Vec<String> = (1..groups).map(|i| format!("[g{i}:children]\ng{}\n", i + 1)).collect();
    if reversed {
        sections.reverse();
    }
    sections.push(format!("[g{groups}]\nh1\n"));
    sections.concat()
}

#[test]
fn a_chain_of_fifty_thousand_nested_groups_is_refused_naming_the_group() {
    let t = Test::new().file("inv.ini", &group_chain(50_000, false));
    let started = Instant::now();
    let out = t.run_in_place(&["hosts", "--inventory", "inv.ini"]);
    let refused = "error: inv.ini: the group `g1000` ends a chain of 1001 nested groups (`all` → `g1` → … → `g1000`); \
                   an inventory may nest at most 1000 groups in a chain (make the chain of `children` shorter)\n";
    assert_eq!((out.0, out.1.as_str(), out.2.as_str()), (2, "", refused));
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());

    // Chains of other lengths, in either order: up to 999 groups below `all` the host is found;
    // past, the thousandth is named.
    let mut rng = Seeded(0x0050_0013);
    for _ in 0..6 {
        let (groups, reversed) = (900 + rng.below(200) as usize, rng.below(2) == 1);
        let t = Test::new().file("inv.ini", &group_chain(groups, reversed));
        let out = t.run_in_place(&["hosts", "g1", "--inventory", "inv.ini"]);
        if groups < 1000 {
            assert_eq!((out.0, out.2.as_str()), (0, ""), "{groups} groups");
            assert!(out.1.contains("h1"), "{groups} groups: {}", out.1);
        } else {
            assert_eq!((out.0, out.1.as_str(), out.2.as_str()), (2, "", refused), "{groups} groups");
        }
    }
}

/// What printing `levels` (outermost first: `true` an array, `false` a map `#{k: …}`) around
/// an empty array shows, the outermost at `depth`: 64 levels, then `[…]` or `#{…}`.
fn shown_nesting(levels: &[bool], depth: usize) -> String {
    let array = levels.first().copied().unwrap_or(true);
    if depth >= 64 {
        return if array { "[…]".into() } else { "#{…}".into() };
    }
    match levels.split_first() {
        None => "[]".to_string(),
        Some((_, rest)) if array => format!("[{}]", shown_nesting(rest, depth + 1)),
        Some((_, rest)) => format!("#{{\"k\": {}}}", shown_nesting(rest, depth + 1)),
    }
}

#[test]
fn printing_an_array_nested_eight_thousand_deep_shows_sixty_four_levels() {
    // Built by wrapping (each wrap copies: 8,000 levels take seconds, 40,000 minutes); Rhai's
    // own printer overflowed the stack at 8,000 already.
    let source = "let a = [];\nfor i in 0..8000 { a = [a]; }\nprint(a);\nlog(`${a}`);\n";
    let t = Test::new().runbook("deep", source);
    let out = t.run_in_place(&["run", "deep", "--timeout", "120s"]);
    let shown = format!("{}[…]{}", "[".repeat(64), "]".repeat(64));
    assert_eq!(
        (out.0, crate::support::mask(&out.1), out.2.as_str()),
        (0, format!("deep (runbooks/deep.rhai)\n  {shown}\n  {shown}\n\n0 passed, 0 failed  ([DUR])\n"), "")
    );

    // Arrays and maps mixed, around the bound: what is shown is the value to 64 levels.
    let mut rng = Seeded(0x0050_0004);
    let cases: Vec<Vec<bool>> =
        (0..6).map(|_| (0..(40 + rng.below(60) as usize)).map(|_| rng.below(2) == 1).collect()).collect();
    let mut source = String::new();
    for levels in &cases {
        source.push_str("let a = [];\n");
        for &array in levels.iter().rev() {
            source.push_str(if array { "a = [a];\n" } else { "a = #{k: a};\n" });
        }
        source.push_str("print(a);\n");
    }
    let t = Test::new().runbook("mixed", &source);
    let out = t.run_in_place(&["run", "mixed"]);
    let expected: String = cases.iter().map(|l| format!("  {}\n", shown_nesting(l, 0))).collect();
    assert_eq!(
        (out.0, crate::support::mask(&out.1), out.2.as_str()),
        (0, format!("mixed (runbooks/mixed.rhai)\n{expected}\n0 passed, 0 failed  ([DUR])\n"), "")
    );
}
