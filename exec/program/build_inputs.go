package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/semantics"
)

// Value names of the inputs.
const (
	stepLatents  = "input:latents" // a step input in a flow_euler run
	stepTimestep = "step:timestep"
	// stepNextTimestep is σ[i+1] at model call i (a mean-flow model's
	// second timestep, the one its step ends at); programs read it only
	// where a model argument is made from it.
	stepNextTimestep = "step:next_timestep"
	// stepIndex is the model call's index i in the run (0 first), as f32:
	// a module a pipeline switches on or off by step (GLIGEN's fusers,
	// on for the first steps only) reads it.
	stepIndex = "step:index"
)

// InputValue is the value name of the request input with a role.
func InputValue(role string) string { return "input:" + role }

// LatentsValue is the value name of a flow_euler run's k-th latents (a
// step input; StepLatents for k = 0).
func LatentsValue(k int) string { return InputValue(semantics.LatentsRole(k)) }

// declareInputs declares every request input the program reads (all but
// the sigmas, which the sampler reads on the host) and, for flow_euler,
// the timestep; each is tapped at the model's input port for its role.
func (b *builder) declareInputs() error {
	module := b.st.Model.Module
	for _, in := range b.st.Inputs {
		if in.Role == "sigmas" {
			continue
		}
		shape, ok := b.shapes.Inputs[in.Role]
		if !ok {
			return fmt.Errorf("the request has no input %q (role %s)", in.Name, in.Role)
		}
		kind := Input
		if _, lat := semantics.LatentsIndex(in.Role); lat && b.st.Run == "flow_euler" {
			kind = StepInput
		}
		name := b.addValue(&Value{Name: InputValue(in.Role), Kind: kind, Source: in.Role, Shape: slices.Clone(shape)})
		if port, ok := b.st.Model.Inputs[in.Role]; ok {
			b.tap(name, module, port, true)
		}
	}
	if b.st.Run == "flow_euler" {
		b.addValue(&Value{Name: stepTimestep, Kind: StepInput, Source: "timestep", Shape: []int{1}})
		if port, ok := b.st.Model.Inputs["timestep"]; ok {
			b.tap(stepTimestep, module, port, true)
		}
	}
	return nil
}

// inputValue returns the value of the input with a role.
func (b *builder) inputValue(role string) (string, error) {
	name := InputValue(role)
	if _, ok := b.p.Values[name]; !ok {
		return "", fmt.Errorf("no request input has role %q", role)
	}
	return name, nil
}

// jointOrder orders the streams as joined sequences hold them
// (joint_order at "model" when there is more than one).
func (b *builder) jointOrder() error {
	if len(b.st.Streams) == 1 {
		b.joint = []string{b.st.Streams[0].Name}
		return nil
	}
	if len(b.st.Streams) != 2 {
		return fmt.Errorf("%d streams: this builder joins two at most", len(b.st.Streams))
	}
	order, err := b.doc.String("joint_order", "model")
	if err != nil {
		return err
	}
	switch order {
	case "text_first":
		b.joint = []string{"text", "image"}
	case "image_first":
		b.joint = []string{"image", "text"}
	default:
		return fmt.Errorf("joint_order %q is not supported", order)
	}
	return nil
}

// hasStream reports whether the structure declares a stream.
func hasStream(st *semantics.Structure, name string) bool {
	for _, s := range st.Streams {
		if s.Name == name {
			return true
		}
	}
	return false
}
