package daemon_test

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/vigil-run/vigil/daemon"
)

// ExampleLoad shows the precedence of settings: a flag beats its
// environment variable, which beats the default.
func ExampleLoad() {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	daemon.BindFlags(fs)
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9000"}); err != nil {
		panic(err)
	}
	env := map[string]string{
		"HOME":             "/home/ada",
		"VIGIL_LISTEN":     "127.0.0.1:8000",
		"VIGIL_ALLOW_EXEC": "true",
	}
	cfg, err := daemon.Load(fs, func(k string) string { return env[k] })
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Listen, cfg.AllowExec, cfg.DataDir, cfg.Validate())
	// Output: 127.0.0.1:9000 true /home/ada/.local/share/vigil <nil>
}
