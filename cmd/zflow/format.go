package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Output formats of the commands that print a result (--format); the
// first is each one's default.
var (
	tableJSON     = []string{"table", "json"}
	reportFormats = []string{"table", "json", "markdown", "junit", "csv"} // diff, verify
	statsFormats  = []string{"table", "json", "markdown", "csv"}
)

// addFormatFlag adds --format (values[0] the default) with its values'
// shell completion; jsonAlias, when not nil, adds --json as an alias of
// --format json (resolveFormat reconciles them).
func addFormatFlag(cmd *cobra.Command, p *string, values []string, jsonAlias *bool) {
	cmd.Flags().StringVar(p, "format", values[0], "output on stdout: "+orList(values))
	completeValues(cmd, "format", values)
	if jsonAlias != nil {
		cmd.Flags().BoolVar(jsonAlias, "json", false, "the same as --format json")
	}
}

// resolveFormat checks a command's --format against its values and folds
// --json into it.
func resolveFormat(cmd *cobra.Command, format string, jsonAlias bool, values []string) (string, error) {
	if jsonAlias {
		if cmd.Flags().Changed("format") && format != "json" {
			return "", fmt.Errorf("--json is --format json: it contradicts --format %s", format)
		}
		format = "json"
	}
	if !slices.Contains(values, format) {
		return "", fmt.Errorf("--format %q: want %s", format, orList(values))
	}
	return format, nil
}

// completeValues completes flag with a fixed list of values (no file
// names).
func completeValues(cmd *cobra.Command, flag string, values []string) {
	// the only error is a flag that does not exist: a bug caught by the tests
	if err := cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(err)
	}
}

// completeReports completes --report with FORMAT= and FORMAT+= prefixes
// (a path follows, so no space is added).
func completeReports(cmd *cobra.Command, formats []string) {
	var values []string
	for _, f := range formats {
		values = append(values, f+"=")
		if slices.Contains(appendableFormats, f) {
			values = append(values, f+"+=")
		}
	}
	if err := cmd.RegisterFlagCompletionFunc("report", cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoSpace|cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(err)
	}
}

// orList is "a, b or c".
func orList(values []string) string {
	if len(values) == 1 {
		return values[0]
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// writeJSON writes v indented, the way every command's --format json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
