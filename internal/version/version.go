// Package version is zflow's version, the one string `zflow --version`
// prints and every JSON document the tool writes carries (zflow_version),
// so that a report found in a CI artifact says which zflow made it.
package version

import "runtime/debug"

// Release is zflow's release.
const Release = "0.1.0"

// String is Release plus the commit the binary was built from, where the
// build recorded it: "0.1.0 (7a2ccd6b1e2f)", "+dirty" after the commit
// for a build of a modified tree.
func String() string {
	v := Release
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " (" + rev + dirty + ")"
	}
	return v
}
