package reports

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/zflow/zflow/internal/version"
)

// Float is a float64 that JSON can always carry: finite values are
// numbers; +Inf, -Inf and NaN, which JSON has no numbers for, are the
// strings "inf", "-inf" and "nan" (which Python's float() and most
// parsers' number conversions read back). PSNR is "inf" for an identical
// pair; rel-RMS is "inf" when the reference is all zeros and ours is not.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	x := float64(f)
	switch {
	case math.IsNaN(x):
		return []byte(`"nan"`), nil
	case math.IsInf(x, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(x, -1):
		return []byte(`"-inf"`), nil
	}
	return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler: a number, or one of the
// three strings.
func (f *Float) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		switch s {
		case "nan":
			*f = Float(math.NaN())
		case "inf":
			*f = Float(math.Inf(1))
		case "-inf":
			*f = Float(math.Inf(-1))
		default:
			return fmt.Errorf("reports: %q is not a number, \"inf\", \"-inf\" or \"nan\"", s)
		}
		return nil
	}
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*f = Float(x)
	return nil
}

// RangeJSON is a Range as [min, max].
type RangeJSON [2]Float

func rangeJSON(r Range) RangeJSON { return RangeJSON{Float(r.Min), Float(r.Max)} }

// The --format json document of zflow diff, version 1 (README.md, "zflow
// diff"). Field names are the contract; new fields may be added, none
// removed or renamed without a new version.
type (
	DiffDoc struct {
		Format       string        `json:"format"` // "zflow-diff"
		Version      int           `json:"version"`
		ZflowVersion string        `json:"zflow_version"` // the tool's, as zflow --version prints it
		Ours         string        `json:"ours"`
		Ref          string        `json:"ref"`
		Selection    SelectionDoc  `json:"selection"`
		Gates        []string      `json:"gates"`
		Pass         bool          `json:"pass"`
		Counts       CountsDoc     `json:"counts"`
		Boundaries   []BoundaryDoc `json:"boundaries"`
		Unpaired     []UnpairedDoc `json:"unpaired"`
		FirstFailing *BoundaryDoc  `json:"first_failing"`
		Diagnosis    *DiagnosisDoc `json:"diagnosis"`
	}
	SelectionDoc struct {
		Step   *int   `json:"step"`
		Module string `json:"module"`
		Port   string `json:"port"`
	}
	CountsDoc struct {
		Boundaries int `json:"boundaries"`
		Passed     int `json:"passed"`
		Failed     int `json:"failed"`
		Skipped    int `json:"skipped"`
		Unpaired   int `json:"unpaired"`
	}
	BoundaryDoc struct {
		Index     int    `json:"index"`
		Key       string `json:"key"`
		Scope     string `json:"scope"`
		Module    string `json:"module"`
		Ordinal   int    `json:"ordinal"`
		Port      string `json:"port"`
		Shape     []int  `json:"shape"`
		OursShape []int  `json:"ours_shape,omitempty"` // only when it differs
		DType     string `json:"dtype"`
		OursDType string `json:"ours_dtype"`

		// null when the pair was not compared (error or skipped)
		Count             *int      `json:"count"`
		Finite            *int      `json:"finite"`
		MaxAbs            *Float    `json:"max_abs"`
		MeanAbs           *Float    `json:"mean_abs"`
		RelRMS            *Float    `json:"rel_rms"`
		Cosine            *Float    `json:"cosine"`
		PSNR              *Float    `json:"psnr"`
		ExactFraction     *Float    `json:"exact_fraction"`
		ULP               *ULPDoc   `json:"ulp"`
		NaN               *SidesDoc `json:"nan"`
		Inf               *SidesDoc `json:"inf"`
		NonFiniteMismatch *int      `json:"nonfinite_mismatch"`
		// mask-sized pairs (precision.MaskSized), left out of the
		// difference metrics: matching, and finite ones that do not match
		Masked       *int       `json:"masked"`
		MaskMismatch *int       `json:"mask_mismatch"`
		WorstRow     *WorstDoc  `json:"worst_row"`
		Pass         bool       `json:"pass"`
		Checks       []CheckDoc `json:"checks"`
		Error        string     `json:"error,omitempty"`
		Skipped      string     `json:"skipped,omitempty"`
	}
	ULPDoc struct {
		Median     uint64 `json:"median"`
		P99        uint64 `json:"p99"`
		Max        uint64 `json:"max"`
		Resolution uint64 `json:"resolution"`
	}
	SidesDoc struct {
		Ours int `json:"ours"`
		Ref  int `json:"ref"`
	}
	WorstDoc struct {
		Row    int   `json:"row"`
		MaxAbs Float `json:"max_abs"`
	}
	CheckDoc struct {
		Gate      string `json:"gate"`      // as given, e.g. "rel_rms<=auto"
		Threshold Float  `json:"threshold"` // what was compared against (auto resolved)
		Value     Float  `json:"value"`
		Pass      bool   `json:"pass"`
		// AllClose: an allclose gate's counts (value is mismatched)
		AllClose *AllCloseDoc `json:"allclose,omitempty"`
	}
	AllCloseDoc struct {
		Atol        Float `json:"atol"`
		Rtol        Float `json:"rtol"`
		EqualNaN    bool  `json:"equal_nan"`
		Mismatched  int   `json:"mismatched"`
		Total       int   `json:"total"`
		MaxAbs      Float `json:"max_abs"`
		MaxAbsIndex int   `json:"max_abs_index"` // flat element index; -1 when none
		MaxRel      Float `json:"max_rel"`
		MaxRelIndex int   `json:"max_rel_index"`
	}
	UnpairedDoc struct {
		Key    string `json:"key"`
		Scope  string `json:"scope"`
		Module string `json:"module"`
		Port   string `json:"port"`
		Side   string `json:"side"`             // the trace that has it: "ours" or "ref"
		Reason string `json:"reason,omitempty"` // why it has no pair, where more is known
		// ShapeMismatch: the other side has a value of another shape here
		// (zflow verify), an error of the port rather than a gap
		ShapeMismatch bool `json:"shape_mismatch,omitempty"`
	}
	DiagnosisDoc struct {
		Boundary  string           `json:"boundary"`
		Signature string           `json:"signature"` // magnitude, bias, activation, topology, numerics, or none
		Reason    string           `json:"reason"`
		Numbers   map[string]Float `json:"numbers"`
		Channels  ChannelsDoc      `json:"channels"`
	}
	ChannelsDoc struct {
		Rows          int          `json:"rows"`
		Count         int          `json:"count"`
		OneRow        bool         `json:"one_row"` // a single row: the diagnosis read its values as one channel
		Ours          SideStatsDoc `json:"ours"`
		Ref           SideStatsDoc `json:"ref"`
		MeanDiffRange RangeJSON    `json:"mean_diff_range"`
		StdDiffRange  RangeJSON    `json:"std_diff_range"`
		StdRatioRange RangeJSON    `json:"std_ratio_range"`
		Worst         []ChannelDoc `json:"worst"` // by falling err_rms
	}
	SideStatsDoc struct {
		MeanRange RangeJSON `json:"mean_range"`
		StdRange  RangeJSON `json:"std_range"`
	}
	ChannelDoc struct {
		Channel  int   `json:"channel"`
		RefMean  Float `json:"ref_mean"`
		OursMean Float `json:"ours_mean"`
		MeanDiff Float `json:"mean_diff"`
		RefStd   Float `json:"ref_std"`
		OursStd  Float `json:"ours_std"`
		StdRatio Float `json:"std_ratio"`
		ErrRMS   Float `json:"err_rms"`
	}
)

// Document is the report as the JSON contract lays it out; worst is how
// many channels diagnosis.channels.worst lists (<= 0: all).
func (r *DiffReport) Document(worst int) DiffDoc {
	doc := DiffDoc{
		Format: "zflow-diff", Version: 1, ZflowVersion: version.String(), Ours: r.Ours, Ref: r.Ref,
		Selection:  SelectionDoc{Step: r.Selection.Step, Module: r.Selection.Module, Port: r.Selection.Port},
		Gates:      []string{},
		Pass:       r.Pass(),
		Boundaries: make([]BoundaryDoc, len(r.Boundaries)),
		Unpaired:   []UnpairedDoc{},
	}
	for _, g := range r.Gates {
		doc.Gates = append(doc.Gates, g.String())
	}
	doc.Counts = r.counts()
	for i := range r.Boundaries {
		doc.Boundaries[i] = r.Boundaries[i].document(i)
	}
	for _, u := range r.Unpaired {
		doc.Unpaired = append(doc.Unpaired, UnpairedDoc{Key: u.Key, Scope: u.Scope, Module: u.Module, Port: u.Port, Side: u.Side, Reason: u.Reason, ShapeMismatch: u.ShapeMismatch})
	}
	if r.FirstFailing >= 0 {
		b := doc.Boundaries[r.FirstFailing]
		doc.FirstFailing = &b
	}
	if f := r.Finding; f != nil {
		doc.Diagnosis = f.document(worst)
	}
	return doc
}

func (r *DiffReport) counts() CountsDoc {
	c := CountsDoc{Boundaries: len(r.Boundaries), Unpaired: len(r.Unpaired)}
	for i := range r.Boundaries {
		switch d := &r.Boundaries[i]; {
		case !d.Pass:
			c.Failed++
		case d.Skipped != "":
			c.Skipped++
		default:
			c.Passed++
		}
	}
	return c
}

func (d *BoundaryDiff) document(i int) BoundaryDoc {
	b := BoundaryDoc{Index: i, Key: d.Key, Scope: d.Scope, Module: d.Module, Ordinal: d.Ordinal, Port: d.Port,
		Shape: d.Shape, DType: d.DType, OursDType: d.OursDType, Pass: d.Pass, Checks: []CheckDoc{},
		Error: d.Error, Skipped: d.Skipped}
	if !slicesEqual(d.Shape, d.OursShape) {
		b.OursShape = d.OursShape
	}
	for _, c := range d.Checks {
		cd := CheckDoc{Gate: c.Gate.String(), Threshold: Float(c.Threshold), Value: Float(c.Got), Pass: c.Pass}
		if s := c.Close; s != nil {
			cd.AllClose = &AllCloseDoc{Atol: Float(s.Tol.Atol), Rtol: Float(s.Tol.Rtol), EqualNaN: s.Tol.EqualNaN, Mismatched: s.Mismatched,
				Total: s.Total, MaxAbs: Float(s.MaxAbs), MaxAbsIndex: s.MaxAbsAt, MaxRel: Float(s.MaxRel), MaxRelIndex: s.MaxRelAt}
		}
		b.Checks = append(b.Checks, cd)
	}
	m := d.Metrics
	if m == nil {
		return b
	}
	f := func(x float64) *Float { v := Float(x); return &v }
	n := func(x int) *int { return &x }
	b.Count, b.Finite = n(m.Count), n(m.Finite)
	b.MaxAbs, b.MeanAbs, b.RelRMS, b.Cosine, b.PSNR = f(m.MaxAbs), f(m.MeanAbs), f(m.RelRMS), f(m.Cosine), f(m.PSNR)
	b.ExactFraction = f(m.ExactFraction)
	b.ULP = &ULPDoc{Median: m.ULP.Median, P99: m.ULP.P99, Max: m.ULP.Max, Resolution: m.ULP.Resolution}
	b.NaN = &SidesDoc{m.Ours.NaN, m.Ref.NaN}
	b.Inf = &SidesDoc{m.Ours.PosInf + m.Ours.NegInf, m.Ref.PosInf + m.Ref.NegInf}
	b.NonFiniteMismatch = n(d.NonFiniteMismatch)
	b.Masked, b.MaskMismatch = n(m.Masked), n(m.MaskMismatch)
	if m.WorstRow >= 0 {
		b.WorstRow = &WorstDoc{Row: m.WorstRow, MaxAbs: Float(m.WorstRowMaxAbs)}
	}
	return b
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (f *Finding) document(worst int) *DiagnosisDoc {
	e := f.Diagnosis.Evidence
	d := &DiagnosisDoc{Boundary: f.Key, Signature: f.Diagnosis.Signature.String(), Reason: f.Diagnosis.Reason,
		Numbers: evidenceNumbers(e)}
	c := f.Channels
	d.Channels = ChannelsDoc{Rows: f.Rows, Count: f.NChannels, OneRow: f.OneRow,
		Ours:          SideStatsDoc{rangeJSON(c.Ours.Mean), rangeJSON(c.Ours.Std)},
		Ref:           SideStatsDoc{rangeJSON(c.Ref.Mean), rangeJSON(c.Ref.Std)},
		MeanDiffRange: rangeJSON(c.MeanDiffRange), StdDiffRange: rangeJSON(c.StdDiffRange), StdRatioRange: rangeJSON(c.Ratio),
		Worst: []ChannelDoc{}}
	for _, ch := range f.WorstChannels(worst) {
		d.Channels.Worst = append(d.Channels.Worst, ChannelDoc{Channel: ch,
			RefMean: Float(c.Ref.Channels[ch].Mean), OursMean: Float(c.Ours.Channels[ch].Mean), MeanDiff: Float(c.MeanDiff[ch]),
			RefStd: Float(c.Ref.Channels[ch].Std), OursStd: Float(c.Ours.Channels[ch].Std), StdRatio: Float(c.StdRatio[ch]),
			ErrRMS: Float(f.ErrRMS[ch])})
	}
	return d
}

// evidenceNumbers lists every Evidence field under its snake_case name;
// ranges become name_min and name_max.
func evidenceNumbers(e Evidence) map[string]Float {
	return map[string]Float{
		"rel_rms": Float(e.RelRMS), "rows": Float(e.Rows),
		"ours_nan": Float(e.OursNaN), "ours_inf": Float(e.OursInf), "ref_nan": Float(e.RefNaN), "ref_inf": Float(e.RefInf),
		"nonfinite_mismatch": Float(e.NonFiniteMismatch),
		"f16_range_mismatch": Float(e.F16RangeMismatch), "f16_range_share": Float(e.F16RangeShare),
		"top_error_share": Float(e.TopErrorShare), "top_error_count": Float(e.TopErrorCount), "top_error_rows": Float(e.TopErrorRows),
		"multiset_match": Float(e.MultisetMatch), "position_match": Float(e.PositionMatch),
		"row_fraction_90": Float(e.RowFraction90),
		"std_ratio_min":   Float(e.StdRatio.Min), "std_ratio_max": Float(e.StdRatio.Max),
		"mean_shift": Float(e.MeanShift),
		"slope_min":  Float(e.Slope.Min), "slope_max": Float(e.Slope.Max),
		"smooth_explained": Float(e.SmoothExplained), "pooled_explained": Float(e.PooledExplained),
		"affine_explained": Float(e.AffineExplained), "systematic": Float(e.Systematic()),
		"scale_share": Float(e.ScaleShare), "mean_share": Float(e.MeanShare),
	}
}
