package semantics

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// notReproduced is a boundary entry as the self-check writes it.
func notReproduced(boundary, sig string, rel float64) Undetermined {
	step := 0
	return Undetermined{Name: UndeterminedBoundary, Scope: "blocks.0", Reason: "not reproduced", Boundary: boundary,
		Step: &step, Steps: 1, Signature: sig, RelRMS: NumberOf(rel), Cosine: NumberOf(1), Tolerance: 1e-4}
}

func checked(notRep int) *Check {
	return &Check{Mode: "teacher_forced", Boundaries: 10, NotReproduced: notRep, Tolerances: map[string]float64{"f32": 1e-4}}
}

// TestValidateStatus: the status, the check and the boundary entries are
// consistent, and only an incomplete document may leave structure out,
// each part named by a structure entry of the undetermined list.
func TestValidateStatus(t *testing.T) {
	hole := func(d *Document) { d.Structure.Blocks[1].Kind = "" }
	named := Undetermined{Name: "structure.blocks", Scope: "blocks.1", Reason: "no q/k/v assignment reproduces the attention"}
	for _, tc := range []struct {
		name string
		edit func(d *Document)
		want string // "" valid
	}{
		{"unchecked", func(d *Document) {}, ""},
		{"complete", func(d *Document) { d.Status, d.Check = StatusComplete, checked(0) }, ""},
		{"unknown status", func(d *Document) { d.Status = "done" }, `status: "done" is not one of`},
		{"check without status", func(d *Document) { d.Check = checked(0) }, "check: a checked document has a status"},
		{"check mode", func(d *Document) { d.Status, d.Check = StatusComplete, checked(0); d.Check.Mode = "free" }, "check.mode"},
		{"tolerance", func(d *Document) {
			d.Status, d.Check = StatusComplete, checked(0)
			d.Check.Tolerances["f32"] = 0
		}, `check.tolerances["f32"]`},
		{"complete but not reproduced", func(d *Document) { d.Status, d.Check = StatusComplete, checked(2) }, "complete, but the check did not reproduce 2"},
		{"complete with a boundary entry", func(d *Document) {
			d.Status, d.Check = StatusComplete, checked(0)
			d.Undetermined = append(d.Undetermined, notReproduced("m/out", "magnitude", 0.8))
		}, "so the document's status is incomplete"},
		{"incomplete with a boundary entry", func(d *Document) {
			d.Status, d.Check = StatusIncomplete, checked(1)
			d.Undetermined = append(d.Undetermined, notReproduced("m/out", "magnitude", 0.8))
		}, ""},
		{"unknown signature", func(d *Document) {
			d.Status, d.Check = StatusIncomplete, checked(1)
			d.Undetermined = append(d.Undetermined, notReproduced("m/out", "vibes", 0.8))
		}, `.signature: "vibes"`},
		{"boundary without rel-RMS", func(d *Document) {
			d.Status = StatusIncomplete
			u := notReproduced("m/out", "bias", 0.8)
			u.RelRMS = nil
			d.Undetermined = append(d.Undetermined, u)
		}, ".rel_rms"},
		{"diagnosis without boundary", func(d *Document) {
			d.Undetermined = append(d.Undetermined, Undetermined{Name: "x", Scope: "model", Reason: "r", Signature: "bias"})
		}, "a diagnosis without a boundary"},
		{"hole in an unchecked document", hole, `structure.blocks[1].kind: "" is not one of`},
		{"hole not named", func(d *Document) { hole(d); d.Status = StatusIncomplete }, "blocks.1: structure.blocks[1].kind"},
		{"hole named", func(d *Document) {
			hole(d)
			d.Status, d.Undetermined = StatusIncomplete, append(d.Undetermined, named)
		}, ""},
		{"hole named by a factor entry", func(d *Document) {
			hole(d)
			d.Status, d.Undetermined = StatusIncomplete, append(d.Undetermined, Undetermined{Name: "norm_kind", Scope: "*", Reason: "r"})
		}, "blocks.1: structure.blocks[1].kind"},
		{"no blocks, named", func(d *Document) {
			d.Structure.Blocks = nil
			d.Factors = nil
			d.Status = StatusIncomplete
			d.Undetermined = append(d.Undetermined, Undetermined{Name: "structure.blocks", Scope: "blocks", Reason: "no call holds an attention"})
		}, ""},
		{"a malformed role stays an error", func(d *Document) {
			d.Status, d.Undetermined = StatusIncomplete, append(d.Undetermined, named)
			d.Structure.Blocks[1].Roles["lora"] = Role{Weight: "w"}
		}, `structure.blocks[1].roles["lora"]: unknown role`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fixture(t, "flux-f32.json")
			tc.edit(d)
			err := d.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrInvalid)):
				t.Errorf("accepted (err %v), want a problem naming %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("err %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestHoles: Holes names each part left out by its address, in structure
// order; a whole document has none.
func TestHoles(t *testing.T) {
	d := fixture(t, "flux-f32.json")
	if h := d.Holes(); len(h) != 0 {
		t.Fatalf("a whole document has holes: %v", h)
	}
	d.Structure.Blocks[1].Kind = ""
	delete(d.Structure.Blocks[2].Roles, "q")
	d.Structure.Final.Stream = ""
	var got []string
	for _, h := range d.Holes() {
		got = append(got, h.Address)
	}
	if want := "blocks.1 blocks.2 final"; strings.Join(got, " ") != want {
		t.Errorf("holes at %v, want %s", got, want)
	}
}

// TestNumberJSON: measurements round-trip, infinities and NaN as strings.
func TestNumberJSON(t *testing.T) {
	for _, x := range []float64{0, 0.77, 1e-300, math.Inf(1), math.Inf(-1), math.NaN()} {
		b, err := json.Marshal(Number(x))
		if err != nil {
			t.Fatalf("%v: %v", x, err)
		}
		var back Number
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if f := float64(back); !(f == x || math.IsNaN(f) && math.IsNaN(x)) {
			t.Errorf("%v → %s → %v", x, b, f)
		}
	}
	var n Number
	if err := json.Unmarshal([]byte(`"big"`), &n); err == nil {
		t.Error(`"big" read as a number`)
	}
}

// TestCheckedDocumentRoundTrip: status, check and boundary entries survive
// Write and Read; an older document without them reads as unchecked.
func TestCheckedDocumentRoundTrip(t *testing.T) {
	d := fixture(t, "flux-f32.json")
	if d.Status != "" || d.Check != nil || d.Incomplete() {
		t.Fatalf("a document without a status reads as %q", d.Status)
	}
	d.Status, d.Check = StatusIncomplete, checked(1)
	d.Undetermined = append(d.Undetermined, notReproduced("m/out", "magnitude", math.Inf(1)))
	path := t.TempDir() + "/doc.json"
	if err := d.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	nr := back.NotReproduced()
	if !back.Incomplete() || back.Check.NotReproduced != 1 || len(nr) != 1 || nr[0].Boundary != "m/out" ||
		!math.IsInf(float64(*nr[0].RelRMS), 1) || *nr[0].Step != 0 {
		t.Errorf("read back status %q, check %+v, entries %+v", back.Status, back.Check, nr)
	}
}
