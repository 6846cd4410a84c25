package vigil

import "runtime/debug"

// Version is the module version this binary was built from, with the Go
// version: a release's tag, or "devel+<commit>" for a build from a
// checkout. The CLI prints it and the daemon shows it on its status page.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v + " (" + bi.GoVersion + ")"
}
