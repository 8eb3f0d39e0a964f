"""Quoted messages (gitrag.query.ranking.messages): a question quoting what a program printed finds
the code that prints it; on a real git repository indexed in-process (real chunker, Go grammar)."""

from __future__ import annotations

import pytest

from gitrag.index.workspace import open_workspace
from gitrag.query.ranking import messages
from gitrag.query.retrieval import ask
from tests.gitutil import Repo, index


def test_quoted_messages_are_the_double_quoted_runs_of_three_words_or_more() -> None:
    text = ('why do I get "required flag(s) \\"name\\" not set" with "--force"? '
            'File "/home/u/app.py", line 3 \u201cunknown shorthand flag: x\u201d')
    assert messages.quoted_messages(text) == ['required flag(s) "name" not set', "unknown shorthand flag: x"]
    assert messages.quoted_messages("plain words, no quotes") == []


@pytest.mark.parametrize(
    ("message", "code", "share"),
    [
        ('required flag(s) "name" not set', 'return fmt.Errorf(`required flag(s) "%s" not set`, names)', 1.0),
        ("accepts at most 1 arg(s), received 2", 'fmt.Errorf("accepts at most %d arg(s), received %d", n, len(a))', 1.0),
        ('unknown command "foo" for "app"', 'fmt.Errorf("unknown command %q for %q%s", a, b, c)', 1.0),
        # a value the format string fills in unquoted ("count") is the one word no run holds
        ("Invalid value for count: expected a number",
         'raise ValueError(f"Invalid value for {name}: expected a number")', 6 / 7),
        # the words alone, in a comment or a docstring's inner line, are no message
        ("called Execute() on a nil Command", "// called Execute() on a nil Command\nreturn nil", 0.0),
        # a run of three words in a literal counts for its share
        ("the value is not a number", 'err := "the value is"', 0.5),
    ],
)
def test_coverage_reads_runs_in_string_literals_with_values_as_slots(message: str, code: str, share: float) -> None:
    assert messages.coverage(message, code) == pytest.approx(share)


COMMAND_GO = """package app

import (
\t"context"
\t"fmt"
\t"io"
)

// Command is just that, a command for your application.
// Execute runs it; a nil Command cannot be executed.
type Command struct {
\t// Use is the one-line usage message of the Command.
\tUse string
\t// Short is the short description shown in the 'help' output of Execute.
\tShort string
\t// Run: typical Command actions, called by Execute.
\tRun func(cmd *Command, args []string)
\tctx context.Context
\tout io.Writer
\tcommands []*Command
\tparent *Command
}

// Execute uses the args and runs the Command through the tree of commands.
func (c *Command) Execute() error {
\treturn c.execute(nil)
}

func (c *Command) execute(args []string) error {
\tif c == nil {
\t\treturn fmt.Errorf("called Execute() on a nil Command")
\t}
\tif c.Run == nil {
\t\treturn fmt.Errorf("command %q is not runnable", c.Use)
\t}
\tc.Run(c, args)
\treturn nil
}

// Commands returns the sub-commands of the Command.
func (c *Command) Commands() []*Command {
\treturn c.commands
}
"""

COMMAND_TEST_GO = """package app

import "testing"

func TestExecuteNil(t *testing.T) {
\tvar c *Command
\tif err := c.Execute(); err == nil || err.Error() != "called Execute() on a nil Command" {
\t\tt.Fatalf("unexpected error: %v", err)
\t}
}
"""


@pytest.fixture
def commands(repo: Repo) -> Repo:
    repo.write("command.go", COMMAND_GO)
    repo.write("command_test.go", COMMAND_TEST_GO)
    repo.write("README.md", "# app\n\nA library for CLI applications. Call Execute on the root Command.\n")
    repo.commit("a command library")
    index(repo.path)
    return repo


QUESTION = 'Execute fails with "called Execute() on a nil Command"'


def test_the_function_holding_a_quoted_message_ranks_above_the_struct_its_words_name(commands: Repo) -> None:
    with open_workspace(commands.path) as ws:
        got = ask(ws, QUESTION, k=5).results
        without = ask(ws, QUESTION, k=5, disable=("messages",)).results
    assert (got[0].path, got[0].symbol) == ("command.go", "Command.execute")
    # what the stage undoes: read as words, the message's names find their definitions
    assert without[0].symbol in {"Command", "Command.Execute"}
    test_rank = next(i for i, r in enumerate(got) if r.path == "command_test.go")
    assert test_rank > 0  # the test asserting the same message stays below (test path prior)


def test_a_quoted_message_no_code_holds_changes_nothing(commands: Repo) -> None:
    question = 'Execute fails with "the moon is made of cheese"'
    with open_workspace(commands.path) as ws:
        got = [(r.path, r.start_line) for r in ask(ws, question, k=5).results]
        without = [(r.path, r.start_line) for r in ask(ws, question, k=5, disable=("messages",)).results]
    assert got == without
