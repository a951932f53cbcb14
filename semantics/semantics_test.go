package semantics

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixture reads a hand-written document from testdata.
func fixture(t *testing.T, name string) *Document {
	t.Helper()
	d, err := Read(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestReadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		d, err := Read(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(d.Structure.Blocks) == 0 || len(d.Factors) == 0 {
			t.Errorf("%s: %d blocks, %d factors", f, len(d.Structure.Blocks), len(d.Factors))
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	d := fixture(t, "flux-bf16.json")
	d.Factors[0].Margin = Margin(math.Inf(1)) // joint_order
	d.Factors[0].Candidates = []Candidate{{Value: "text_first", Score: 1e-7}, {Value: "image_first", Score: 0.0019}}
	d.Factors[1].Margin = 18834
	path := filepath.Join(t.TempDir(), "doc.json")
	if err := d.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Structure, back.Structure) || !reflect.DeepEqual(d.Precision, back.Precision) {
		t.Error("structure or precision changed in a round trip")
	}
	if !math.IsInf(float64(back.Factors[0].Margin), 1) || back.Factors[1].Margin != 18834 {
		t.Errorf("margins %v, %v", back.Factors[0].Margin, back.Factors[1].Margin)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"margin": "inf"`) {
		t.Error(`an infinite margin is not written as "inf"`)
	}
}

// TestStampZflowVersion: the writer's version goes into a copy of the
// producer (never the map it was made from, which may be a trace
// manifest's) and survives a round trip; the fixtures, older than it,
// have none and still read.
func TestStampZflowVersion(t *testing.T) {
	d := fixture(t, "dit-bf16.json")
	if _, ok := d.Source.Producer[ProducerZflowVersion]; ok {
		t.Fatal("the fixture already has a zflow_version: the test no longer shows an older document reads")
	}
	orig := d.Source.Producer
	d.Source.StampZflowVersion("0.1.0 (abc)")
	if _, ok := orig[ProducerZflowVersion]; ok {
		t.Error("the stamp changed the producer map it copied")
	}
	path := filepath.Join(t.TempDir(), "doc.json")
	if err := d.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Source.Producer[ProducerZflowVersion]; got != "0.1.0 (abc)" {
		t.Errorf("zflow_version read back %v", got)
	}
	if back.Source.Producer["written_by"] != orig["written_by"] || orig["written_by"] == nil {
		t.Errorf("producer written_by %v, want %v", back.Source.Producer["written_by"], orig["written_by"])
	}
}

// TestWriteRefusesInvalid: an invalid document is not written and leaves
// no temporary file behind.
func TestWriteRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	d := fixture(t, "llama-f32.json")
	d.Version = 7
	if err := d.Write(filepath.Join(dir, "doc.json")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d files behind", len(entries))
	}
}

// TestValidateNamesTheField: each broken document is refused with an error
// naming the field at fault.
func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(d *Document)
		want   string
	}{
		{"format", func(d *Document) { d.Format = "other" }, "format:"},
		{"version", func(d *Document) { d.Version = 9 }, "version: 9 is not supported"},
		{"sha256", func(d *Document) { d.Source.SHA256 = "abc" }, "source.sha256"},
		{"trace", func(d *Document) { d.Source.Trace = "" }, "source.trace: empty"},
		{"zflow version", func(d *Document) { d.Source.Producer = map[string]any{"zflow_version": 1.0} }, "source.producer.zflow_version: 1 is not a version string"},
		{"empty zflow version", func(d *Document) { d.Source.StampZflowVersion("") }, "source.producer.zflow_version"},
		{"run", func(d *Document) { d.Structure.Run = "ddim" }, "structure.run"},
		{"hidden", func(d *Document) { d.Structure.Hidden = 0 }, "structure.hidden"},
		{"stream name", func(d *Document) { d.Structure.Streams[0].Name = "audio" }, "structure.streams[0].name"},
		{"input role", func(d *Document) { d.Structure.Inputs[0].Role = "noise" }, "structure.inputs[0].role"},
		{"no sigmas", func(d *Document) { d.Structure.Inputs = d.Structure.Inputs[:1] }, `needs an input with role "sigmas"`},
		{"block kind", func(d *Document) { d.Structure.Blocks[1].Kind = "mamba" }, "structure.blocks[1].kind"},
		{"missing role", func(d *Document) { delete(d.Structure.Blocks[0].Roles, "image.q") }, `structure.blocks[0].roles: required role "image.q" is missing`},
		{"unknown role", func(d *Document) { d.Structure.Blocks[0].Roles["image.lora"] = Role{Weight: "w"} }, `structure.blocks[0].roles["image.lora"]: unknown role`},
		{"linear without weight", func(d *Document) { d.Structure.Blocks[2].Roles["q"] = Role{Module: "m"} }, `structure.blocks[2].roles["q"].weight`},
		{"point with weight", func(d *Document) { d.Structure.Conditioning.Roles["sinusoid"] = Role{Module: "m", Weight: "w"} }, `roles["sinusoid"]: a point role has no parameters`},
		{"kv heads", func(d *Document) { d.Structure.Blocks[0].KVHeads = 3 }, "structure.blocks[0].kv_heads"},
		{"dual of one stream", func(d *Document) { d.Structure.Blocks[0].Streams = []string{"image"} }, "a dual_stream block has two streams"},
		{"boundary role", func(d *Document) { d.Structure.Blocks[0].Boundary.Inputs["audio"] = "kw.x" }, `port role "audio"`},
		{"model port", func(d *Document) { d.Structure.Model.Outputs["latents"] = "out.0" }, `structure.model.outputs["latents"]: not one of velocity`},
		{"final port", func(d *Document) { d.Structure.Final.Boundary.Inputs["temb"] = "arg1" }, `structure.final.boundary.inputs["temb"]`},
		{"empty port", func(d *Document) { d.Structure.Positions.Boundary.Outputs["cos"] = "" }, "empty port"},
		{"embedder stream", func(d *Document) { d.Structure.Embedders[0].Stream = "video" }, "structure.embedders[0].stream"},
		{"position input", func(d *Document) {
			d.Structure.Positions.Streams["image"] = PositionSource{From: "input", Input: "context"}
		}, ""},
		{"position source", func(d *Document) { d.Structure.Positions.Streams["image"] = PositionSource{From: "random"} }, "positions.streams[image].from"},
		{"factor name", func(d *Document) { d.Factors[0].Name = "gate_function" }, `factors[0].name: "gate_function" is not in the factor catalogue`},
		{"enum value", func(d *Document) { setFactor(d, "gate_fn", "relu") }, "(gate_fn).value"},
		{"bool value", func(d *Document) { setFactor(d, "mlp_glu", "no") }, "(mlp_glu).value"},
		{"number value", func(d *Document) { setFactor(d, "euler_sign", 2.0) }, "(euler_sign).value: 2 must be one of"},
		{"ints value", func(d *Document) { setFactor(d, "rope_axes", []any{4.0, 5.0, 7.0}) }, "(rope_axes).value: element 1"},
		{"order value", func(d *Document) { setFactor(d, "modulation_order", "shift,shift,gate") }, `names "shift" twice`},
		{"order length", func(d *Document) { setFactor(d, "final_norm_order", "scale") }, "must name each of shift, scale once"},
		{"scope", func(d *Document) { d.Factors[0].Scope = "blocks.9" }, `"blocks.9" matches no address`},
		{"overlap", func(d *Document) {
			d.Factors = append(d.Factors, Factor{Name: "norm_eps", Scope: "final.norm", Value: 1e-5, Evidence: Evidence{Metric: "declared"}})
		}, "overlaps"},
		{"metric", func(d *Document) { d.Factors[0].Evidence.Metric = "vibes" }, ".evidence.metric"},
		{"measured without boundary", func(d *Document) { d.Factors[0].Evidence.Metric = "rel_rms" }, ".evidence.boundary"},
		{"margin", func(d *Document) { d.Factors[0].Margin = -1 }, ".margin"},
		{"candidate", func(d *Document) {
			setFactor(d, "joint_order", "text_first")
			for i := range d.Factors {
				if d.Factors[i].Name == "joint_order" {
					d.Factors[i].Candidates = []Candidate{{Value: "middle_out"}}
				}
			}
		}, ".candidates[0].value"},
		{"activations", func(d *Document) { d.Precision.Activations = "fp8" }, "precision.activations"},
		{"rule op", func(d *Document) { d.Precision.Rules = append(d.Precision.Rules, PrecisionRule{Op: "conv"}) }, ".op: \"conv\""},
		{"rule round", func(d *Document) {
			d.Precision.Rules = append(d.Precision.Rules, PrecisionRule{Op: "norm", Round: "product|sometimes"})
		}, `.round: "sometimes"`},
		{"rope table", func(d *Document) { d.Precision.RopeTable.Angle = "bf16" }, "precision.rope_table.angle"},
		{"exact fraction", func(d *Document) { d.Precision.Exact = map[string]float64{"s0/x/out": 1.5} }, "precision.exact"},
		{"scoring sample", func(d *Document) { d.Precision.Scoring = map[string]Scored{"x/out": {Rows: 128, Of: 4608}} }, ""},
		{"scoring rows past the tensor", func(d *Document) { d.Precision.Scoring = map[string]Scored{"x/out": {Rows: 9, Of: 8}} }, `precision.scoring["x/out"]`},
		{"scoring no rows", func(d *Document) { d.Precision.Scoring = map[string]Scored{"x/out": {}} }, `precision.scoring["x/out"]`},
		{"undetermined", func(d *Document) { d.Undetermined = []Undetermined{{Name: "gate_fn"}} }, "undetermined[0].reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fixture(t, "flux-f32.json")
			tc.break_(d)
			err := d.Validate()
			if tc.want == "" { // a valid change
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

func setFactor(d *Document, name string, v any) {
	for i := range d.Factors {
		if d.Factors[i].Name == name {
			d.Factors[i].Value = v
			return
		}
	}
	panic("no factor " + name)
}

func TestParseRefusesUnknownFieldsAndJunk(t *testing.T) {
	b, err := os.ReadFile("testdata/llama-f32.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"unknown field": strings.Replace(string(b), `"run": "forward"`, `"run": "forward", "runs": 2`, 1),
		"trailing":      string(b) + "{}",
		"not json":      "{",
		"wrong type":    strings.Replace(string(b), `"hidden": 64`, `"hidden": "64"`, 1),
	} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestMatchScope(t *testing.T) {
	for _, c := range []struct {
		scope, addr string
		want        bool
	}{
		{"*", "blocks.0.image.q", true},
		{"blocks.*", "blocks.12", true},
		{"blocks.*", "final", false},
		{"blocks.*.q_norm", "blocks.3.q_norm", true},
		{"blocks.*.q_norm", "blocks.3.image.q_norm", true},
		{"blocks.*.q_norm", "blocks.3.q", false},
		{"final*", "final.norm", true},
		{"final", "final.norm", false},
		{"*.norm", "embed.text.norm", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
	} {
		if got := MatchScope(c.scope, c.addr); got != c.want {
			t.Errorf("MatchScope(%q, %q) = %v", c.scope, c.addr, got)
		}
	}
}

func TestLookupTyped(t *testing.T) {
	d := fixture(t, "qwenimage-bf16.json")
	if v, err := d.String("norm_kind", "embed.text.norm"); err != nil || v != "rms" {
		t.Errorf("norm_kind at embed.text.norm = %q, %v", v, err)
	}
	if v, err := d.String("norm_kind", "blocks.1.image.norm2"); err != nil || v != "layer" {
		t.Errorf("norm_kind at blocks.1.image.norm2 = %q, %v", v, err)
	}
	if v, err := d.IntList("rope_axes", "positions"); err != nil || !reflect.DeepEqual(v, []int{4, 6, 6}) {
		t.Errorf("rope_axes = %v, %v", v, err)
	}
	if v, err := d.OrderAt("final_norm_order", "final"); err != nil || !reflect.DeepEqual(v, []string{"scale", "shift"}) {
		t.Errorf("final_norm_order = %v, %v", v, err)
	}
	if v, err := d.Bool("modulation_plus_one", "final"); err != nil || !v {
		t.Errorf("modulation_plus_one = %v, %v", v, err)
	}
	if _, err := d.Number("rope_theta", "blocks.0"); err == nil {
		t.Error("rope_theta covers blocks.0")
	}
}

func TestMarginJSON(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		err  bool
	}{{`"inf"`, math.Inf(1), false}, {`3.5`, 3.5, false}, {`"lots"`, 0, true}, {`null`, 0, false}} {
		var m Margin
		err := json.Unmarshal([]byte(c.in), &m)
		if (err != nil) != c.err || (!c.err && float64(m) != c.want) {
			t.Errorf("%s: %v, %v", c.in, float64(m), err)
		}
	}
	if _, err := json.Marshal(Margin(math.NaN())); err == nil {
		t.Error("a NaN margin was written")
	}
}

func TestParamPaths(t *testing.T) {
	d := fixture(t, "llama-f32.json")
	paths := d.Structure.ParamPaths()
	if len(paths) != 20 { // the llama trace has 20 parameters
		t.Errorf("%d parameter paths, want 20: %v", len(paths), paths)
	}
}

func TestIndicesValues(t *testing.T) {
	spec, ok := LookupSpec("timestep_freq_overrides")
	if !ok {
		t.Fatal("timestep_freq_overrides is not in the catalogue")
	}
	for _, tc := range []struct {
		v  any
		ok bool
	}{
		{[]any{}, true},
		{[]any{0.0, 13.0, 44.0}, true},
		{[]int{13, 44}, true},
		{[]any{13.0, 13.0}, false}, // not increasing
		{[]any{44.0, 13.0}, false},
		{[]any{-1.0}, false},
		{[]any{1.5}, false},
		{"13,44", false},
	} {
		if err := spec.CheckValue(tc.v); (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok %v", tc.v, err, tc.ok)
		}
	}
}
