package speech

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/unsay/unsay"

// forbiddenDeps returns the packages in deps that the speech side may not
// depend on (P-18): store and everything under it, and bridge and every
// package under it other than bridge/speech itself.
func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		switch {
		case d == module+"/store" || strings.HasPrefix(d, module+"/store/"):
			bad = append(bad, d)
		case d == module+"/bridge/speech" || strings.HasPrefix(d, module+"/bridge/speech/"):
		case d == module+"/bridge" || strings.HasPrefix(d, module+"/bridge/"):
			bad = append(bad, d)
		}
	}
	return bad
}

func TestForbiddenDeps_FlagsStoreAndBridgeButNotSpeech(t *testing.T) {
	deps := []string{
		module + "/models",
		module + "/bridge/speech",
		module + "/store",
		module + "/store/envelope",
		module + "/bridge",
		module + "/bridge/auth",
		module + "/bridgework", // a different package that only shares a prefix
		module + "/storefront",
		"github.com/modelcontextprotocol/go-sdk/mcp",
	}
	want := []string{module + "/store", module + "/store/envelope", module + "/bridge", module + "/bridge/auth"}
	if got := forbiddenDeps(deps); !slices.Equal(got, want) {
		t.Fatalf("forbiddenDeps = %v, want %v", got, want)
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	return p
}

// P-18: the surface that talks to Ray cannot reach the store or the
// MCP server's code; it reaches facts only over MCP with care.read.user.
func TestImports_SkillAndSpeechDoNotDependOnStoreOrBridge(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, args := range [][]string{
		{"list", "-e", "-deps", "./skill/...", "./bridge/speech/..."},
		{"list", "-e", "-deps", "-test", "./bridge/speech/..."}, // our tests too
	} {
		cmd := exec.Command(goTool(t), args...)
		cmd.Dir = moduleRoot(t)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		var deps []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			// With -test a line may read "pkg [pkg.test]" or "pkg.test".
			f := strings.Fields(line)
			if len(f) > 0 {
				deps = append(deps, strings.TrimSuffix(f[0], ".test"))
			}
		}
		if !slices.Contains(deps, module+"/bridge/speech") || !slices.Contains(deps, module+"/models") {
			t.Fatalf("go %s did not list bridge/speech and models: %v", strings.Join(args, " "), deps)
		}
		if bad := forbiddenDeps(deps); len(bad) > 0 {
			t.Errorf("go %s: forbidden dependencies %v (P-18)", strings.Join(args, " "), bad)
		}
	}
}
