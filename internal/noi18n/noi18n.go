// Package noi18n keeps kubectl from loading its message catalogs: cli-utils
// links kubectl's command packages, whose help texts are translated as the
// process starts (about 20 ms and 4 MB on every kplan run), and kplan shows
// none of them. Imported by the mains; its import path sorts before
// k8s.io/kubectl, so its init runs before theirs (Go initializes ready
// packages in import-path order).
package noi18n

import "k8s.io/kubectl/pkg/util/i18n"

func init() {
	// Only fails once translations are loaded, which this init precedes.
	_ = i18n.SetLoadTranslationsFunc(func() error { return nil })
}
