// kevin light header: see kevin_lite/torch.h
#pragma once
#include "kevin_lite/torch.h"
