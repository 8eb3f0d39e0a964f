"""Implementation over declaration (issue 20): option declarations and in-file test code as
chunk roles read from the real grammars, the path priors of each ecosystem, and the ranking
that weighs them, end to end on a real repository with the test embedder."""

from __future__ import annotations

import pytest

from gitrag.index.chunking import analyze
from gitrag.index.workspace import open_workspace
from gitrag.query.ranking import Candidate, analyse
from gitrag.query.ranking.stages import apply_role_priors, asked_for, asks_of, path_prior
from gitrag.query.retrieval import search
from tests.gitutil import Repo, index


def _roles(path: str, source: str) -> dict[str, dict[str, float]]:
    return {c.symbol: dict(c.roles) for c in analyze(path, source.encode()).chunks}


CLICK = '''import click


@click.command()
@click.option("--count", default=1, help="Number of greetings.")
@click.option("--name", prompt="Your name", help="The person to greet.")
@click.argument("path")
def hello(count, name, path):
    return count


def greet(name):
    return "Hello " + name.strip().title()
'''


def test_click_options_and_argparse_calls_are_declarations() -> None:
    roles = _roles("cli.py", CLICK)
    assert roles["hello"]["decl"] > 0.5 and roles["greet"] == {}
    parser = _roles("args.py", "import argparse\n\ndef build():\n    p = argparse.ArgumentParser()\n"
                    "    p.add_argument('--verbose', action='store_true', help='be loud')\n"
                    "    p.add_argument('--level', type=int, default=3, help='how loud')\n    return p\n")
    assert parser["build"]["decl"] > 0.5


RUST = '''use clap::{Arg, Command};

pub fn build_app() -> Command {
    Command::new("bat")
        .arg(Arg::new("line-range").long("line-range").short('r').help("Only print the lines from N to M."))
        .arg(Arg::new("number").long("number").short('n').help("Show line numbers"))
}

#[derive(Parser)]
struct Cli {
    #[arg(short, long)]
    name: String,
    count: u8,
}

pub fn parse_range(s: &str) -> Option<(usize, usize)> {
    let mut it = s.split(':');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses() {
        assert_eq!(parse_range("30:40"), Some((30, 40)));
    }
}
'''


def test_rust_clap_builders_derives_and_test_modules() -> None:
    roles = _roles("src/app.rs", RUST)
    assert roles["build_app"]["decl"] > 0.8  # the whole Command::new(..).arg(Arg::new(..)) chain
    assert roles["Cli"]["decl"] == 1.0  # #[derive(Parser)]: every field is an option
    assert roles["parse_range"] == {}
    assert roles["tests"] == {"test": 1.0}


def test_go_flags_js_options_java_annotations_and_getopt() -> None:
    go = _roles("cmd/root.go", 'package cmd\n\nfunc init() {\n\trootCmd.PersistentFlags().StringVarP(&cfg, "config", "c", "", '
                '"config file")\n\trootCmd.Flags().BoolP("toggle", "t", false, "toggle")\n}\n\n'
                'func Execute() error {\n\treturn rootCmd.Execute()\n}\n')
    assert go["init"]["decl"] > 0.8 and go["Execute"] == {}
    js = _roles("bin/cli.js", "const { program } = require('commander');\nprogram\n  .option('-d, --debug', 'debug')\n"
                "  .option('-s, --small', 'small');\nfunction run(opts) { return opts.debug ? 1 : 0; }\n")
    assert js["program"]["decl"] > 0.5 and js["run"] == {}
    java = analyze("src/main/java/App.java", b'class App {\n    @Option(names = {"-v"}, description = "verbose")\n'
                   b"    private boolean verbose;\n    int run() { return verbose ? 1 : 0; }\n    @Test\n"
                   b"    void works() { assert run() == 0; }\n}\n").chunks
    assert {r for c in java for r, _ in c.roles} == {"decl", "test"}
    c = _roles("opt.c", "#include <getopt.h>\nstatic struct option long_options[] = {\n    {\"verbose\", no_argument, 0, 'v'},"
               "\n    {0, 0, 0, 0}\n};\nint main(int argc, char **argv) { return 0; }\n")
    assert any(r.get("decl", 0) > 0.5 for r in c.values()) and c["main"] == {}


def test_a_method_named_like_a_test_in_an_implementation_file_is_not_test_code() -> None:
    roles = _roles("flaskish/app.py", "class App:\n    def test_client(self):\n        return Client(self)\n")
    assert all(not r for r in roles.values())


@pytest.mark.parametrize("path", [
    "pkg/testdata/input.json", "src/test/java/com/x/AppTest.java", "lib/__tests__/a.js", "src/a.spec.ts",
    "benches/parse.rs", "tests/fixtures/x.py", "x_test.go", "types/index.d.ts", "api/v1/service.pb.go",
    "proto/service_pb2.py", "contrib/completion/_fd", "LICENSE-APACHE", "appveyor.yml", "third_party/gtest/gtest.h",
    "core/src/main/resources/data/homepage.json", "src/iter/test.rs", "rayon-demo/src/main.rs",
    "src/importers/postman-2.1.types.ts", "docs/javadoc/2.10/com/x/Reader.html", "completions/tool.bash", "RELEASE_NOTES.md", "CHANGELOG.md", ".github/ISSUE_TEMPLATE/bug.yml",
])
def test_path_priors_of_each_ecosystem(path: str) -> None:
    assert path_prior(path, frozenset()) < 1.0
    assert path_prior("docs/javadoc/2.10/com/x/Reader.html", frozenset()) < path_prior("docs/guide.md", frozenset())
    assert path_prior("src/lib/parse.ts", frozenset()) == 1.0


def test_asks_lift_the_priors_and_a_long_question_asks_in_its_title() -> None:
    assert "declarations" in asked_for("where are the typings for createClient")
    assert "declarations" in asked_for("zsh completion does not offer --hidden")
    assert "options" in asked_for("which flags does the serve command take")
    assert "options" not in asked_for("how are arguments parsed")
    body = "the docs say the retry limit is 3\n" + "it retries forever instead " * 20
    assert "docs" not in asks_of(analyse("Retry limit ignored\n" + body))
    assert "docs" in asks_of(analyse("Docs: retry limit is wrong\n" + body))


def test_role_prior_scales_declarations_unless_asked() -> None:
    def cands() -> dict[str, Candidate]:
        return {"d": Candidate("d", "cli.py", 1, 9, score=1.0, payload={"decl": 1.0}),
                "t": Candidate("t", "src/x.rs", 1, 9, score=1.0, payload={"test": 1.0}),
                "i": Candidate("i", "core.py", 1, 9, score=1.0, payload={})}
    plain = cands()
    apply_role_priors(plain, analyse("how is the greeting built"))
    assert (plain["d"].score, plain["t"].score, plain["i"].score) == (0.5, pytest.approx(0.3), 1.0)
    asked = cands()
    apply_role_priors(asked, analyse("which options does hello declare, and what tests cover it"))
    assert asked["d"].score == asked["t"].score == 1.0
    # a pasted issue: its fix changes the declarations as often as the code behind them
    issue = cands()
    apply_role_priors(issue, analyse("`--max-results` is ignored\nfd --max-results 1 prints every match"))
    assert (issue["d"].score, issue["t"].score) == (1.0, pytest.approx(0.3))


def test_search_prefers_the_implementation_over_option_declarations_and_tests(repo: Repo) -> None:
    options = "\n".join(f'@click.option("--range-{i}", help="line range start and end, like 30:40")' for i in range(12))
    repo.write("app/main.py", f"import click\n\n\n@click.command()\n{options}\ndef main(**kw):\n    return kw\n")
    repo.write("app/ranges.py", "def parse_line_range(text):\n    start, _, end = text.partition(':')\n"
               "    return int(start), int(end)\n")
    repo.write("src/ranges.rs", "pub fn split_range(s: &str) -> (usize, usize) {\n    let (a, b) = s.split_once(':').unwrap();\n"
               "    (a.parse().unwrap(), b.parse().unwrap())\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n"
               "    fn line_range_start_end() {\n        // a line range like 30:40: start and end\n"
               "        assert_eq!(super::split_range(\"30:40\"), (30, 40));\n    }\n}\n")
    repo.commit("cli")
    index(repo.path)
    with open_workspace(repo.path) as ws:
        got = search(ws, "how is a line range like 30:40 parsed into start and end", k=5)
        before = search(ws, "how is a line range like 30:40 parsed into start and end", k=5, disable=("roles",))
    order = [(r.path, r.symbol) for r in got]
    assert order.index(("app/main.py", "main")) > min(order.index(("app/ranges.py", "parse_line_range")),
                                                     order.index(("src/ranges.rs", "split_range")))
    test_at = [i for i, r in enumerate(got) if r.symbol.startswith("tests")]
    old_at = [i for i, r in enumerate(before) if r.symbol.startswith("tests")]
    assert not test_at or not old_at or test_at[0] >= old_at[0]
    assert next(r.score for r in got if r.symbol == "main") < next(r.score for r in before if r.symbol == "main")
