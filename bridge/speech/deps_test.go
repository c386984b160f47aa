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

// goListDeps runs go list args in the module and returns the packages it
// names, test variants folded into their package.
func goListDeps(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command(goTool(t), args...)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	var deps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// With -test a line may read "pkg [pkg.test]", "pkg.test" or
		// "pkg_test [pkg.test]" (an external test package).
		f := strings.Fields(line)
		if len(f) > 0 {
			deps = append(deps, strings.TrimSuffix(strings.TrimSuffix(f[0], ".test"), "_test"))
		}
	}
	return deps
}

// The one import-rule test: dependencies point one way (models ← store ←
// bridge; models ← bridge/speech; models, apl ← skill). Above all P-18:
// the surface that talks to Ray — the skill, its screens, the speech
// principal, and their tests — cannot reach the store or the MCP server's
// code; it reaches facts only over MCP with care.read.user.
func TestImports_TheLayersPointOneWay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, rule := range []struct {
		name      string
		args      []string
		mustList  []string // the listing looks at the right packages
		forbidden func(deps []string) []string
		planted   string // a dependency the rule must catch (its twin)
	}{
		{"skill, apl and bridge/speech, tests too, never depend on store or bridge (P-18)",
			[]string{"list", "-e", "-deps", "-test", "./skill/...", "./apl/...", "./bridge/speech/..."},
			[]string{module + "/skill", module + "/apl", module + "/bridge/speech", module + "/models"}, forbiddenDeps,
			module + "/store"},
		{"the MCP server does not depend on the parts mounted on it or wiring it",
			[]string{"list", "-e", "-deps", "./bridge"},
			[]string{module + "/bridge", module + "/store"},
			func(deps []string) (bad []string) {
				for _, d := range deps {
					if d == module+"/bridge/httpapi" || d == module+"/bridge/oauth" || d == module+"/bridge/app" || d == module+"/bridge/cmd" {
						bad = append(bad, d)
					}
				}
				return bad
			}, module + "/bridge/httpapi"},
		{"models is the vocabulary: the standard library only",
			[]string{"list", "-e", "-deps", "./models"},
			[]string{module + "/models"},
			func(deps []string) (bad []string) {
				for _, d := range deps {
					if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") && d != module+"/models" {
						bad = append(bad, d)
					}
				}
				return bad
			}, "github.com/google/go-cmp/cmp"},
	} {
		t.Run(rule.name, func(t *testing.T) {
			deps := goListDeps(t, rule.args...)
			for _, m := range rule.mustList {
				if !slices.Contains(deps, m) {
					t.Fatalf("go %s did not list %s: %v", strings.Join(rule.args, " "), m, deps)
				}
			}
			if bad := rule.forbidden(deps); len(bad) > 0 {
				t.Errorf("go %s: forbidden dependencies %v", strings.Join(rule.args, " "), bad)
			}
			if bad := rule.forbidden(append(slices.Clone(deps), rule.planted)); !slices.Contains(bad, rule.planted) {
				t.Errorf("the rule does not catch %s", rule.planted)
			}
		})
	}
}
