package cmd

import (
	"context"
	"fmt"
	"runtime/debug"
)

// cmdVersion prints "unsay VERSION (commit COMMIT[, modified], built
// TIME) with GO": -ldflags values when set, else the module version and the
// VCS stamp Go puts in the binary (debug.ReadBuildInfo).
func cmdVersion(ctx context.Context, args []string, b Build) error {
	c, fs := newCommand("version")
	if _, err := parseFlags(c, fs, args); err != nil {
		return err
	}
	fmt.Println(versionLine(b))
	return nil
}

func versionLine(b Build) string {
	v, rev, when, modified, goVersion := b.Version, b.Commit, "", false, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	if rev == "" {
		rev = "unknown"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	line := "unsay " + v + " (commit " + rev
	if modified {
		line += ", modified"
	}
	if when != "" {
		line += ", " + when
	}
	line += ")"
	if goVersion != "" {
		line += " with " + goVersion
	}
	return line
}
