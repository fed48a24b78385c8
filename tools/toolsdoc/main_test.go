package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var fixture = filepath.Join("..", "..", "internal", "contract", "testdata", "good")

func TestRenderListsEveryToolWithAnnotationsAndIntent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tools.md")
	if err := run(fixture, out, false); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, row := range []string{
		// name | intent (operation summary) | RO | D | I | OW | permission | idempotency | concurrency | pagination | exposure
		"| `checkpoint_save` | Replace the checkpoint if its revision is unchanged | no | no | yes | no | agent_mutation | key | cas | none | default |",
		"| `checkpoint_get` | Read the checkpoint | yes | no | yes | no | read_only | natural | none | none | default |",
		// a router tool has no operation: its description's first sentence is too long
		// for one line of intent, so the title stands in
		"| `tool_search` | Search tools | yes |",
		"`rooms_list`",
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("tools.md lacks %q:\n%s", row, doc)
		}
	}
	if strings.Count(doc, "\n| `") != 6 {
		t.Errorf("want one table row per tool (6)")
	}

	// -check passes on the file it wrote and fails once the file is stale.
	if err := run(fixture, out, true); err != nil {
		t.Errorf("check of a fresh file: %v", err)
	}
	if err := os.WriteFile(out, append(data, "edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(fixture, out, true); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("check of an edited file: %v", err)
	}
}
