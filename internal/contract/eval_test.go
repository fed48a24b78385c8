package contract_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/contract"
)

func evalDir(t *testing.T, dir string) *contract.EvalReport {
	t.Helper()
	b, err := contract.LoadBaseline(filepath.Join(dir, "eval-baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	return contract.Eval(loadDir(t, dir), b)
}

func TestEvalRealSpecHoldsBaseline(t *testing.T) {
	rep := evalDir(t, filepath.Join("..", "..", "spec"))
	var out bytes.Buffer
	rep.WriteText(&out)
	t.Logf("\n%s", out.String())
	if !rep.OK() {
		t.Errorf("eval below its baseline:\n%s", out.String())
	}
	if rep.Figures.Scenarios != 5*rep.Figures.Tools {
		t.Errorf("%d scenarios for %d tools", rep.Figures.Scenarios, rep.Figures.Tools)
	}
}

func TestEvalGoodFixturePrintsFigures(t *testing.T) {
	rep := evalDir(t, filepath.Join("testdata", "good"))
	if !rep.OK() {
		t.Fatalf("good fixture fails eval: %v", rep.Failures)
	}
	var out bytes.Buffer
	rep.WriteText(&out)
	for _, want := range []string{"accuracy  1.000 (30/30", "margin    min", "overlap   max", "floor", "ceiling"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Deterministic: the same input gives byte-identical output.
	var again bytes.Buffer
	evalDir(t, filepath.Join("testdata", "good")).WriteText(&again)
	if again.String() != out.String() {
		t.Errorf("eval is not deterministic:\n%s\n---\n%s", out.String(), again.String())
	}
}

// A description edited to read like its neighbour's must fail the guard.
func TestEvalFailsOnCollidingDescription(t *testing.T) {
	fx := readFixture(t, filepath.Join("testdata", "eval", "collide.json"))
	rep := evalDir(t, materialize(t, fx.Patches))
	if rep.OK() {
		t.Fatalf("colliding descriptions (%s) passed eval: %+v", fx.Why, rep.Figures)
	}
	var out bytes.Buffer
	rep.WriteText(&out)
	t.Logf("\n%s", out.String())
	if !strings.Contains(out.String(), "FAIL") {
		t.Errorf("failure not printed")
	}
}

// The same on the real registry: copy one tool's text onto its nearest neighbour.
func TestEvalRealSpecFailsWhenNeighboursCollide(t *testing.T) {
	dir := filepath.Join("..", "..", "spec")
	c := loadDir(t, dir)
	b, err := contract.LoadBaseline(filepath.Join(dir, "eval-baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	get, save := c.ToolByName("checkpoint_get"), c.ToolByName("checkpoint_save")
	if get == nil || save == nil {
		t.Skip("checkpoint tools not in the registry")
	}
	get.Title, get.Description = save.Title, save.Description
	if rep := contract.Eval(c, b); rep.OK() {
		t.Errorf("checkpoint_get with checkpoint_save's text passed eval: %+v", rep.Figures)
	}
}

func TestEvalRecordPassesItsOwnRun(t *testing.T) {
	c := loadDir(t, filepath.Join("testdata", "good"))
	rep := contract.Eval(c, nil)
	b := rep.Record("test")
	if again := contract.Eval(c, b); !again.OK() {
		t.Errorf("a freshly recorded baseline fails its own run: %v", again.Failures)
	}
	if b.AccuracyFloor != 1 || b.MarginFloor > rep.Figures.MinMargin || b.OverlapCeiling < rep.Figures.MaxOverlap {
		t.Errorf("recorded %+v from %+v", b, rep.Figures)
	}
}
