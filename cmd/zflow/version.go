package main

import zversion "github.com/zflow/zflow/internal/version"

// version is zflow's release; versionString adds the commit the binary was
// built from where the build recorded it (package internal/version, which
// the JSON documents read too).
const version = zversion.Release

func versionString() string { return zversion.String() }
