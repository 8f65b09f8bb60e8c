package api

func commandsDoc(old, doc []byte, gates string) ([]byte, error) { return old, nil }
