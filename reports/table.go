package reports

import (
	"io"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// writeTable renders a header and rows with tablewriter: ASCII lines for
// the terminal (markdown false) or a GitHub-flavoured Markdown table.
// Columns whose align is "r" are right-aligned (numbers).
func writeTable(w io.Writer, markdown bool, align string, header []string, rows [][]string) error {
	aligns := make([]tw.Align, len(header))
	for i := range aligns {
		aligns[i] = tw.AlignLeft
		if i < len(align) && align[i] == 'r' {
			aligns[i] = tw.AlignRight
		}
	}
	var r tw.Renderer
	if markdown {
		r = renderer.NewMarkdown()
	} else {
		r = renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(r),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: aligns}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
	)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}
