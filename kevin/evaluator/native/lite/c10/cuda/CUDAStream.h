// kevin light header: see kevin_lite/cuda.h
#pragma once
#include "kevin_lite/cuda.h"
