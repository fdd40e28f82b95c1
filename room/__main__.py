import sys

from room.launch import main

sys.exit(main())
