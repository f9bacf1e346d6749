package action

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/shard"
)

// partPrefix starts the name of every part file the Action writes; the
// merge run reads the files so named under its parts directory.
const partPrefix = "kplan-part-"

// writePart stores a shard's part under RUNNER_TEMP for the job to upload
// (the part-file output).
func writePart(a *githubactions.Action, part shard.Part, s shard.Shard, getenv func(string) string, log *slog.Logger) error {
	data, err := json.Marshal(part)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s%d-of-%d.json", partPrefix, s.Index, s.Count)
	path, err := writeTempFile(name, data, getenv)
	if err != nil {
		return fmt.Errorf("write the part of shard %s: %w", s, err)
	}
	a.SetOutput("part-file", path)
	log.Info("shard planned: upload the part-file output for the merge job", "shard", s.String(), "overlays", len(part.Plan.Overlays), "part", path)
	return nil
}

// mergeParts reads the part files under dir (actions/download-artifact
// puts each artifact in a directory of its own unless merge-multiple) and
// merges them.
func mergeParts(dir string, log *slog.Logger) (*inventorydiff.Plan, error) {
	var parts []shard.Named
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), partPrefix) || filepath.Ext(path) != ".json" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		part, err := shard.Decode(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		parts = append(parts, shard.Named{Name: path, Part: part})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("input merge: read the parts under %s: %w", dir, err)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("input merge: no %s*.json under %s: download the shards' part-file artifacts there first", partPrefix, dir)
	}
	p, err := shard.Merge(parts)
	if err != nil {
		return nil, fmt.Errorf("input merge: %w", err)
	}
	log.Info("parts merged", "parts", len(parts), "overlays", len(p.Overlays))
	return p, nil
}
