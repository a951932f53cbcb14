package discover

import (
	"fmt"
	"maps"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Producer is what the document's source.producer says wrote it.
const Producer = "zflow discover"

// source names the trace: its path, its SHA-256 and its producer.
func source(tr *trace.Trace) (semantics.Source, error) {
	sum, err := tr.SHA256()
	if err != nil {
		return semantics.Source{}, fmt.Errorf("discover: %w", err)
	}
	p := map[string]any{}
	maps.Copy(p, tr.Manifest.Producer)
	p["written_by"] = Producer
	return semantics.Source{Trace: tr.Path, SHA256: sum, Producer: p}, nil
}

// precision is the placeholder plan a generator runs with (package doc).
func (d *discovery) precision() semantics.Precision {
	acts := d.storedFormat(d.st.Model.Module, d.outputPort())
	if !acts.Valid() {
		acts = precision.F32
	}
	p := semantics.Precision{Status: "placeholder", Activations: acts.String()}
	if c := d.st.Conditioning; c != nil {
		if at, _ := d.doc.String("timestep_scale_at", "conditioning"); at == "input" && d.timestepRounded != nil {
			// The scaled timestep is stored in the model's timestep format
			// when the reference rounds it, else kept in f32.
			out := precision.F32
			if *d.timestepRounded {
				out = d.storedFormat(d.st.Model.Module, d.st.Model.Inputs["timestep"])
			}
			if out != acts && out.Valid() {
				p.Rules = append(p.Rules, semantics.PrecisionRule{Op: "mul", Role: "conditioning.timestep_scale", Out: out.String()})
			}
		}
		if r, ok := c.Roles["sinusoid"]; ok && r.Module != "" {
			if f := d.storedFormat(r.Module, r.OutPort()); f.Valid() && f != acts {
				p.Rules = append(p.Rules, semantics.PrecisionRule{Op: "timestep_embed", Out: f.String()})
			}
		}
	}
	if d.st.Positions != nil {
		t := &semantics.RopeTableFormats{Freq: "f32", Angle: "f32", Out: "f32"}
		if d.ropeFreq != "" {
			t.Freq, t.Angle, t.Out = d.ropeFreq, d.ropeAngle, d.ropeOut
		}
		p.RopeTable = t
	}
	return p
}

// outputPort is the model call's result port (velocity or hidden).
func (d *discovery) outputPort() string {
	for _, role := range []string{"velocity", "hidden"} {
		if p := d.st.Model.Outputs[role]; p != "" {
			return p
		}
	}
	return ""
}

// storedFormat is the format a port of a module's first call is stored in
// (invalid when the trace has no such port).
func (d *discovery) storedFormat(module, port string) precision.Format {
	for _, c := range d.tr.Tree().Calls() {
		if c.Module != module {
			continue
		}
		key, ok := c.Tensors.Key(port)
		if !ok {
			continue
		}
		info, err := d.tr.Info(key)
		if err != nil {
			return 0
		}
		switch info.DType {
		case trace.BFloat16:
			return precision.BF16
		case trace.Float16:
			return precision.F16
		case trace.Float32, trace.Float64:
			return precision.F32
		}
		return 0
	}
	return 0
}
