package main

import "io"

// previewEdits prints, for every file setup would change, the change as a
// unified diff (diffFile), and writes nothing: what --print shows.
func previewEdits(edits []fileEdit, stdout io.Writer) error {
	for _, fe := range edits {
		if err := diffFile(fe.path, fe.mode, fe.edit, stdout); err != nil {
			return err
		}
	}
	return nil
}
