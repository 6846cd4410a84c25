package daemon_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/daemon"
)

// TestDeliverySettings: the smtp.* keys, webhooks and webhook_secrets read
// from the environment; bad ones are refused naming the key and never
// quoting a password or secret.
func TestDeliverySettings(t *testing.T) {
	t.Parallel()
	const secret = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh5eg=="
	env := map[string]string{"HOME": "/home/ada",
		"VIGIL_SMTP_HOST": "localhost", "VIGIL_SMTP_PORT": "2525", "VIGIL_SMTP_USER": "vigil",
		"VIGIL_SMTP_PASSWORD": "pw-s3cret", "VIGIL_SMTP_FROM": "vigil@example.com", "VIGIL_SMTP_STARTTLS": "false",
		"VIGIL_WEBHOOKS": "agent-7=https://hooks.example/a, ops=https://hooks.example/o", "VIGIL_WEBHOOK_SECRETS": "agent-7=" + secret,
		"VIGIL_PUBLIC_URL": "https://vigil.example.com"}
	c, err := daemon.Load(nil, fakeEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	s := c.Delivery.SMTP
	if s.Host != "localhost" || s.Port != 2525 || s.User != "vigil" || s.Password != "pw-s3cret" || s.From != "vigil@example.com" || !s.NoStartTLS {
		t.Errorf("SMTP = %+v", s)
	}
	if c.Delivery.Webhooks["ops"] != "https://hooks.example/o" || c.Delivery.WebhookSecrets["agent-7"] != secret || c.Delivery.PublicURL != "https://vigil.example.com" {
		t.Errorf("Delivery = %+v", c.Delivery)
	}
	for _, tc := range []struct{ key, value, want string }{
		{"VIGIL_WEBHOOK_SECRETS", "agent-7=whsec_bm90LWVub3VnaA==", "webhook_secrets"},
		{"VIGIL_WEBHOOK_SECRETS", "agent-7", "RECIPIENT=whsec_"},
		{"VIGIL_WEBHOOKS", "agent-7=ftp://x", "webhooks"},
		{"VIGIL_SMTP_PORT", "70000", "smtp.port"},
		{"VIGIL_SMTP_FROM", "Vigil <v@example.com>", "smtp.from"},
		// Each parses as v@example.com, and went as it was written into
		// MAIL FROM:<…> and the From header, every mail refused.
		{"VIGIL_SMTP_FROM", "<v@example.com>", "smtp.from"},
		{"VIGIL_SMTP_FROM", `"v"@example.com`, "smtp.from"},
		{"VIGIL_SMTP_FROM", "v@example.com (vigil)", "smtp.from"},
		{"VIGIL_PUBLIC_URL", "vigil.example.com", "public_url"},
		{"VIGIL_PUBLIC_URL", "https://u:p@vigil.example.com", "public_url"},
		// A host with its port, or as a URL, was taken and every mail
		// failed to dial "[mail.example.com:587]:587".
		{"VIGIL_SMTP_HOST", "mail.example.com:587", "smtp.host"},
		{"VIGIL_SMTP_HOST", "smtp://mail.example.com", "smtp.host"},
		{"VIGIL_SMTP_HOST", "mail example.com", "smtp.host"},
		// One recipient twice kept the last without a word.
		{"VIGIL_WEBHOOKS", "ops=https://hooks.example/a,ops=https://hooks.example/b", `"ops" is given twice`},
		{"VIGIL_WEBHOOK_SECRETS", "agent-7=" + secret + ",ops=" + secret + ",agent-7=" + secret, `"agent-7" is given twice`},
	} {
		bad := map[string]string{"HOME": "/home/ada", "VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_USER": "vigil", "VIGIL_SMTP_PASSWORD": "pw-s3cret", tc.key: tc.value}
		c, err := daemon.Load(nil, fakeEnv(bad))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want an error naming %s", tc.key, tc.value, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "pw-s3cret") || strings.Contains(err.Error(), "bm90LWVub3VnaA") {
			t.Errorf("%s=%s: the error %q shows a secret", tc.key, tc.value, err)
		}
	}
	if _, err := daemon.Load(nil, fakeEnv(map[string]string{"HOME": "/home/ada", "VIGIL_SMTP_USER": "u"})); err == nil {
		c, _ := daemon.Load(nil, fakeEnv(map[string]string{"HOME": "/home/ada", "VIGIL_SMTP_USER": "u"}))
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "smtp.host") {
			t.Errorf("smtp.user without smtp.host: %v, want an error naming smtp.host", err)
		}
	}
	for _, k := range daemon.Keys() {
		if strings.Contains(k.Default, "pw-") {
			t.Errorf("key %s shows %q", k.Name, k.Default)
		}
	}
}

// TestSMTPAuthSettings refuses at start the SMTP authentication settings
// that could never authenticate: net/smtp sends a password over plain text
// only to localhost, so smtp.user with smtp.starttls off to another host
// had every mail refused at AUTH, undeliverable; and a password with no
// user was never sent, every mail going out unauthenticated.
func TestSMTPAuthSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string // "" means valid
	}{
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_USER": "vigil", "VIGIL_SMTP_PASSWORD": "pw-s3cret"}, ""},
		{map[string]string{"VIGIL_SMTP_HOST": "localhost", "VIGIL_SMTP_USER": "vigil", "VIGIL_SMTP_PASSWORD": "pw-s3cret", "VIGIL_SMTP_STARTTLS": "false"}, ""},
		{map[string]string{"VIGIL_SMTP_HOST": "127.0.0.1", "VIGIL_SMTP_USER": "vigil", "VIGIL_SMTP_STARTTLS": "false"}, ""},
		{map[string]string{"VIGIL_SMTP_HOST": "::1", "VIGIL_SMTP_USER": "vigil", "VIGIL_SMTP_STARTTLS": "false"}, ""},
		{map[string]string{"VIGIL_SMTP_HOST": "relay.internal", "VIGIL_SMTP_STARTTLS": "false"}, ""},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_USER": "vigil", "VIGIL_SMTP_PASSWORD": "pw-s3cret", "VIGIL_SMTP_STARTTLS": "false"}, "smtp.user"},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_PASSWORD": "pw-s3cret"}, "smtp.password"},
	} {
		env := map[string]string{"HOME": "/home/ada"}
		for k, v := range tc.env {
			env[k] = v
		}
		c, err := daemon.Load(nil, fakeEnv(env))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: Validate() = %v, want nil", tc.env, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%v: Validate() = %v, want an error naming %s", tc.env, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "pw-s3cret"):
			t.Errorf("%v: Validate() = %v: shows the password", tc.env, err)
		}
	}
}

// TestSMTPImplicitTLSSettings: smtp.tls is on for port 465 unless given;
// smtp.tls false on port 465 (a port that speaks TLS from the first byte)
// is refused at start naming smtp.tls; and a password may go to another
// host with smtp.starttls off when smtp.tls is on, the connection being
// encrypted from its first byte.
func TestSMTPImplicitTLSSettings(t *testing.T) {
	t.Parallel()
	show := func(c daemon.Config) string { return strconv.FormatBool(daemon.SMTPImplicitTLS(c)) }
	for _, tc := range []struct {
		env      map[string]string
		want     string // "" means valid
		shownTLS string
	}{
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com"}, "", "false"},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_PORT": "465"}, "", "true"},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_PORT": "465", "VIGIL_SMTP_TLS": "true"}, "", "true"},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_PORT": "2465", "VIGIL_SMTP_TLS": "true"}, "", "true"},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_PORT": "465", "VIGIL_SMTP_TLS": "false"}, "smtp.tls", ""},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_PORT": "465", "VIGIL_SMTP_USER": "vigil",
			"VIGIL_SMTP_PASSWORD": "pw-s3cret", "VIGIL_SMTP_STARTTLS": "false"}, "", "true"},
		{map[string]string{"VIGIL_SMTP_HOST": "mail.example.com", "VIGIL_SMTP_PORT": "587", "VIGIL_SMTP_USER": "vigil",
			"VIGIL_SMTP_PASSWORD": "pw-s3cret", "VIGIL_SMTP_STARTTLS": "false"}, "smtp.user", ""},
	} {
		env := map[string]string{"HOME": "/home/ada"}
		for k, v := range tc.env {
			env[k] = v
		}
		c, err := daemon.Load(nil, fakeEnv(env))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: Validate() = %v, want nil", tc.env, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%v: Validate() = %v, want an error naming %s", tc.env, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "pw-s3cret"):
			t.Errorf("%v: Validate() = %v: shows the password", tc.env, err)
		}
		if got := show(c); tc.want == "" && got != tc.shownTLS {
			t.Errorf("%v: smtp.tls taken as %s, want %s", tc.env, got, tc.shownTLS)
		}
	}
}
