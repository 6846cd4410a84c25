package wire

// KeyFingerprints name a daemon's signing material without showing it, as
// GET /v1/daemon gives them to the admin (keys): a short digest of each
// line of its webhook.secret, in the file's order, one of its link.key,
// and those of the signing settings of its configuration. Every replica
// on one database shows the same.
type KeyFingerprints struct {
	WebhookSecret []string `json:"webhook_secret"`
	LinkKey       string   `json:"link_key"`
	// Settings is empty from a daemon of a build before they were
	// shown.
	Settings SettingsFingerprints `json:"settings"`
}

// SettingsFingerprints name a daemon's signing settings without showing
// them: a digest of its webhook_secrets (each recipient's secret
// fingerprinted as a line of webhook.secret is, sorted by recipient), of
// its webhooks (sorted by recipient) and of its public_url (normalised).
type SettingsFingerprints struct {
	WebhookSecrets string `json:"webhook_secrets"`
	Webhooks       string `json:"webhooks"`
	PublicURL      string `json:"public_url"`
}
