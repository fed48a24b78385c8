package bench

import "os"

func currentPID() int { return os.Getpid() }
